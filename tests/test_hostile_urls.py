"""A database URL's password, in any form, never reaches a page, an error message or the server log.

Hostile passwords: ``%`` and a space (libpq quotes such a URL back in its error), an invalid
percent-encoding, a percent-encoded one, unicode; schemes ``postgresql://``, ``postgres://`` and
``postgresql+psycopg://``. Each is tried against the real PostgreSQL of ``.ci/run`` (a wrong password,
or a malformed URL libpq refuses) and on the page with the server budget on.
"""

from __future__ import annotations

import logging
import traceback

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page.conversation import shared_store
from memora.backends.redaction import MIN_SECRET_RUN, redact, url_secrets
from memora.classroom.server_budget import ServerBudgetUnavailable
from memora.classroom.store import StoreError, new_conversation_id, open_store
from memora.classroom.store.owner import new_owner
from tests.support.app import APP, CLASSROOM_KEY, finish, texts, tree_text
from tests.support.stores import require_postgres_url

pytestmark = pytest.mark.usefixtures("no_secrets")

PASSWORDS = (
    "pa ss%word-Classroom",  # a space and a bare %: libpq answers 'unexpected spaces found in "<password>"'
    "p%zzw0rd-Classroom",  # no valid percent-encoding: 'invalid percent-encoded token: "<password>"'
    "p%40ss%2Fw%20rd-Classroom",  # percent-encoded as it should be: decoded it is p@ss/w rd-Classroom
    "pässwörd-學生-Classroom",  # unicode
)
SCHEMES = ("postgresql", "postgres")


def hostile_urls(base: str, port: int = 5432) -> list[tuple[str, str]]:
    """(url, password as written) for each hostile password and scheme, on the host of ``base``, the test cluster."""
    database = base.rpartition("/")[2]
    return [(f"{scheme}://memora:{password}@127.0.0.1:{port}/{database}", password) for password in PASSWORDS for scheme in SCHEMES]


def leaks(text: str, password: str) -> list[str]:
    """Every form of ``password`` found in ``text``: whole, or any run of ``MIN_SECRET_RUN`` characters, in any case."""
    lowered = text.lower()
    found = []
    for form in {password, *url_secrets(f"x://u:{password}@h")}:
        runs = [form] if len(form) <= MIN_SECRET_RUN else [form[i : i + MIN_SECRET_RUN] for i in range(len(form) - MIN_SECRET_RUN + 1)]
        found += [run for run in runs if run.lower() in lowered]
    return found


def test_redact_removes_a_url_password_in_every_form_and_any_scheme() -> None:
    for password in PASSWORDS:
        for scheme in ("postgresql", "postgres", "postgresql+psycopg", "https"):
            url = f"{scheme}://memora:{password}@db.example:5432/class"
            text = f'missing "=" after "{url}" in connection info string; invalid percent-encoded token: "{password}"'
            shown = redact(text, url_secrets(url))
            assert leaks(shown, password) == [], shown
            assert "db.example:5432/class" in shown, "the rest of the message stays readable"
    # A URL nobody configured is still stripped of its credentials by shape.
    assert redact("see postgresql+psycopg://admin:hunter2hunter2@10.0.0.1/db") == "see postgresql+psycopg://[redacted]@10.0.0.1/db"
    assert redact("host=db password='a b c d' user=x") == "host=db password=[redacted] user=x"


def test_the_store_and_the_ledger_never_name_the_password_in_their_errors(postgres_url) -> None:
    from memora.classroom.postgres_ledger import PostgresServerLedger

    for url, password in [*hostile_urls(postgres_url), *hostile_urls(postgres_url, port=9)]:
        with pytest.raises(StoreError) as failed:
            open_store(url).load(new_conversation_id(), new_owner())
        # As a log or Streamlit prints it: the traceback, with any chained exception it shows.
        printed = "".join(traceback.format_exception(failed.value))
        assert leaks(printed, password) == [], printed
        with pytest.raises(ServerBudgetUnavailable) as refused:
            PostgresServerLedger(url, 1_000).reserve(10, "reply")
        assert leaks("".join(traceback.format_exception(refused.value)), password) == [], str(refused.value)
        assert leaks(repr(PostgresServerLedger(url, 1_000)), password) == []


def test_settings_refuse_an_unknown_scheme_without_quoting_the_url() -> None:
    from memora.app.settings import SettingsError, load_settings

    for password in PASSWORDS:
        with pytest.raises(SettingsError) as refused:
            load_settings({}, {"MEMORA_STORE_URL": f"postgresql+psycopg://memora:{password}@127.0.0.1/db"})
        assert leaks(str(refused.value), password) == []


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_page_on_a_hostile_database_url_shows_and_logs_no_form_of_the_password(password, monkeypatch, caplog, postgres_url) -> None:
    url = f"postgresql://memora:{password}@127.0.0.1:5432/{postgres_url.rpartition('/')[2]}"
    monkeypatch.setenv("OPENAI_API_KEY", CLASSROOM_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MEMORA_MAX_RETRIES", "0")
    monkeypatch.setenv("MEMORA_STORE_URL", url)
    monkeypatch.setenv("MEMORA_MAX_SERVER_TOKENS", "100000")
    monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "true")
    caplog.set_level(logging.DEBUG)
    shared_store.clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["c"] = new_conversation_id()  # a reload: the store is read at once, and fails
    finish(at.run())
    opened = texts(at)
    assert "The conversation store could not be read" in opened and "store cannot be read right now" in opened
    pages = tree_text(at)
    at.chat_input[0].set_value("Hello?").run()
    finish(at)
    assert "nothing was sent" in texts(at)
    assert not at.exception
    pages += tree_text(at)
    assert leaks(pages, password) == []
    assert leaks(caplog.text, password) == []
    shared_store.clear()


ROLE = "teacher_role_7f3a"
"""A role name no page text would hold by chance (``memora`` is the app's own name)."""


@pytest.mark.parametrize("failure", ["nothing listens on the port", pytest.param("the login is refused", marks=pytest.mark.integration)])
def test_a_locked_page_shows_students_no_database_host_port_or_role(failure, monkeypatch, caplog) -> None:
    """Issue 28, item 6: libpq's error (host, port, role) reached a locked page; it is for the teacher's log only."""
    from benchmarks.harness.processes import free_port

    port = free_port() if failure == "nothing listens on the port" else int(require_postgres_url().rpartition(":")[2].partition("/")[0])
    password = "pa55-Classroom-db"
    monkeypatch.setenv("MEMORA_STORE_URL", f"postgresql://{ROLE}:{password}@127.0.0.1:{port}/memora_test")
    monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "true")
    caplog.set_level(logging.DEBUG)
    shared_store.clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["c"] = new_conversation_id()  # a reload: the store is read at once, and fails
    finish(at.run())
    assert "The conversation store could not be read" in texts(at)
    at.chat_input[0].set_value("Hello?").run()
    finish(at)
    assert not at.exception
    shown = texts(at)
    assert "This conversation could not be saved" in shown and "PostgreSQL" in shown, "the page still says what failed"
    pages = tree_text(at)
    for detail in ("127.0.0.1", f"port {port}", f":{port}", f'"{port}"', ROLE, "memora_test"):
        assert detail not in pages, f"{detail!r} is on the page"
    assert "127.0.0.1" in caplog.text and str(port) in caplog.text and ROLE in caplog.text, "the teacher's log says where"
    assert leaks(pages + caplog.text, password) == []
    shared_store.clear()
