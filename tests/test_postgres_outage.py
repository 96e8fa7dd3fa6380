"""PostgreSQL stopped and started with students mid-class, the server budget on: no traceback, no billed token lost.

This runs against a cluster of its own (``MEMORA_TEST_POSTGRES_OUTAGE_CLUSTER``, created by ``.ci/run``),
which it stops and starts with ``pg_ctlcluster``; the cluster every other test shares is never touched.
Students are AppTest sessions of one server process, each with a recording fake model and a browser of its
own (AppTest sends no cookie, so each session is given its browser's secret, as the cookie would give it),
sharing the process's store and ledger connections as a class on one server does.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.app.page.conversation import shared_store
from memora.app.page.state import new_memory
from memora.app.settings import Settings
from memora.classroom.store.owner import new_browser_secret
from tests.support.app import APP, CLASSROOM_KEY, finish, send, texts, tree_text
from tests.support.budget import outage_cluster, pg_ctlcluster
from tests.support.fakes import GatedBackend, ScriptedBackend

pytestmark = pytest.mark.usefixtures("no_secrets")

CAP = 1_000_000


@pytest.fixture
def cluster():
    """The outage cluster, its tables emptied (it is this module's alone), and started again whatever happens."""
    import psycopg

    name, url = outage_cluster()
    with psycopg.connect(url, autocommit=True) as connection:
        for table in ("memora_server_requests", "memora_conversations"):
            if connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                connection.execute(f"DELETE FROM {table}")
    shared_store.clear()
    try:
        yield name, url
    finally:
        if not _online(url):
            pg_ctlcluster(name, "start")
        shared_store.clear()


def _online(url: str) -> bool:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=2).close()
        return True
    except psycopg.Error:
        return False


def student(url: str, backend: ScriptedBackend, browser: str, conversation_id: str | None = None) -> AppTest:
    """A tab of ``browser`` (its cookie's secret); with ``conversation_id``, a reload of that conversation's URL."""
    settings = Settings(
        backend="openai",
        model="gpt-4.1-mini",
        api_key=CLASSROOM_KEY,
        max_reply_tokens=100,
        max_server_tokens=CAP,
        store_url=url,
        locked=True,
    )
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[keys.SETTINGS] = settings
    at.session_state[keys.MEMORY] = new_memory(settings, backend)
    at.session_state[keys.BROWSER_SECRET] = browser
    if conversation_id is not None:
        at.query_params["c"] = conversation_id
    return finish(at.run())


def no_traceback(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert "Traceback" not in tree_text(at)
    assert at.chat_input, "the chat box is there"


def ledger_rows(url: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(url) as connection:
        settled = connection.execute("SELECT COALESCE(SUM(tokens), 0) FROM memora_server_requests WHERE settled").fetchone()[0]
        still_open = connection.execute("SELECT COUNT(*) FROM memora_server_requests WHERE NOT settled").fetchone()[0]
    return int(settled), int(still_open)


def test_postgresql_down_and_back_mid_class(cluster) -> None:
    name, url = cluster
    backends = [ScriptedBackend(), ScriptedBackend(), GatedBackend()]
    backends[2].release()  # the third student's first reply is not held
    browsers = [new_browser_secret() for _ in backends]
    pages = [student(url, backend, browser) for backend, browser in zip(backends, browsers, strict=True)]
    for index, page in enumerate(pages):
        send(page, f"Hello, I am student {index}.")
    ids = [page.query_params["c"] for page in pages]

    # A restart with no page in between: every connection of this process is now stale.
    pg_ctlcluster(name, "stop")
    pg_ctlcluster(name, "start")
    reloaded = student(url, ScriptedBackend(), browsers[1], ids[1])  # the first reload after the restart
    no_traceback(reloaded)
    assert reloaded.session_state[keys.MEMORY].history[0].content == "Hello, I am student 1."
    assert reloaded.query_params["c"] == ids[1]
    pages[1] = reloaded
    billers = [*backends, reloaded.session_state[keys.MEMORY].server.backend.inner]

    # Mid-class: the third student's reply is being written when the database stops.
    gated = backends[2]
    gated.hold()
    pages[2].chat_input[0].set_value("What did I say?").run()
    assert gated.streaming.wait(30)
    pg_ctlcluster(name, "stop")
    gated.release()
    finish(pages[2])
    no_traceback(pages[2])
    assert pages[2].session_state[keys.MEMORY].history[-1].content == "reply 2", "the billed reply is kept"
    assert "Not saved yet, will retry" in texts(pages[2])
    assert "could not be saved" in texts(pages[2])

    # Every page while it is down: a notice, never a traceback; a message is refused before it is sent.
    for page in pages:
        page.run()
        no_traceback(page)
        assert "its store cannot be read right now" in texts(page)
    assert all("Not saved yet" not in texts(page) for page in pages[:2]), "only the page whose reply is unsaved says so"
    sent = len(backends[0].replies)
    pages[0].chat_input[0].set_value("Can I still talk?").run()
    finish(pages[0])
    no_traceback(pages[0])
    assert len(backends[0].replies) == sent and "nothing was sent and nothing was billed" in texts(pages[0])
    assert pages[0].chat_input[0].value == "Can I still talk?"

    # Back: the very next run of each page works; a message sent in it gets its reply.
    pg_ctlcluster(name, "start")
    reruns = 0  # runs before the one whose message gets its reply
    while send(pages[0], "Can I still talk?").session_state[keys.MEMORY].history[-1].content != "reply 2":
        reruns += 1
        assert reruns < 5, "the chat box stays unusable after PostgreSQL is back"
    no_traceback(pages[0])
    assert reruns == 0, f"{reruns} reruns before the chat box was usable again"
    pages[2].run()
    no_traceback(pages[2])
    assert "Not saved yet" not in texts(pages[2]) and "could not be saved" not in texts(pages[2])
    restored = student(url, ScriptedBackend(), browsers[2], ids[2])
    assert [m.content for m in restored.session_state[keys.MEMORY].history][-2:] == ["What did I say?", "reply 2"]

    settled, still_open = ledger_rows(url)
    billed = sum(tokens for backend in billers for _, tokens in backend.billed)
    assert (billed - settled, still_open) == (0, 0), f"{billed - settled} billed tokens missing from the ledger"
