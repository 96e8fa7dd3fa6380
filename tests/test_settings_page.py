"""Issue 28: settings fail closed on the page (AppTest). A malformed value stops the page before anything else is
drawn, naming every variable to fix and what it accepts, on the page and in the server's log; nothing opens on
defaults. The same through a real ``streamlit run`` and Chromium is in test_browser_settings.py."""

from __future__ import annotations

import logging

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from tests.support.app import APP, CLASSROOM_ENV, CLASSROOM_KEY, ENV_NAMES, texts, tree_text
from tests.support.settings import MALFORMED, settings_read

REFUSED = "Memora cannot start until the"


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (*ENV_NAMES, *CLASSROOM_ENV, *settings_read()):
        monkeypatch.delenv(name, raising=False)


def opened(caplog) -> AppTest:
    caplog.set_level(logging.ERROR, logger="memora.app.page.startup")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception, at.exception
    return at


def assert_refused(at: AppTest) -> None:
    """Nothing but the refusal: no memory, no chat input, no sidebar, no settings widgets."""
    assert keys.MEMORY not in at.session_state and keys.SETTINGS not in at.session_state
    assert len(at.chat_input) == 0 and len(at.sidebar.children) == 0
    assert len(at.error) == 1 and REFUSED in at.error[0].value


def test_the_issues_locked_classroom_with_one_bad_cap_is_refused_on_the_page_and_in_the_log(tmp_path, monkeypatch, caplog) -> None:
    """The report: a key, the lock, a data folder and MEMORA_MAX_STORE_MB=0 opened unlocked, offline, on ~/.memora."""
    data = tmp_path / "classroom-data"
    for name, value in {
        "OPENAI_API_KEY": CLASSROOM_KEY,
        "MEMORA_LOCK_SETTINGS": "true",
        "MEMORA_DATA_DIR": str(data),
        "MEMORA_MAX_STORE_MB": "0",
        "MEMORA_MAX_TURNS": "forty",
    }.items():
        monkeypatch.setenv(name, value)
    at = opened(caplog)
    assert_refused(at)
    problems = [
        "MEMORA_MAX_TURNS must be a whole number from 1 to 1000000, not 'forty'",
        "MEMORA_MAX_STORE_MB must be a whole number from 1 to 1000000000, not 0",
    ]
    assert "the 2 setting problem(s) below" in at.error[0].value
    assert at.code[0].value == "\n".join(f"- {problem}" for problem in problems)
    assert all(problem in caplog.text for problem in problems)
    assert CLASSROOM_KEY not in tree_text(at) and CLASSROOM_KEY not in caplog.text
    assert "Offline mode" not in texts(at), "never the offline page on defaults"
    assert not data.exists() and not (tmp_path / ".memora").exists(), "no store or ledger opened anywhere"
    at.run()  # a rerun, as a click would cause, still opens nothing
    assert_refused(at)


def test_every_setting_malformed_at_once_is_listed_on_the_page(monkeypatch, caplog) -> None:
    names = sorted(settings_read())
    for name in names:
        monkeypatch.setenv(name, MALFORMED)
    at = opened(caplog)
    assert_refused(at)
    listed = at.code[0].value.splitlines()
    assert sorted(line.removeprefix("- ").split(" ", 1)[0] for line in listed) == names
    assert f"the {len(names)} setting problem(s) below" in at.error[0].value


def test_limits_that_do_not_fit_together_are_refused_not_replaced_by_the_defaults(monkeypatch, caplog) -> None:
    monkeypatch.setenv("MEMORA_MAX_INPUT_TOKENS", "3000")
    monkeypatch.setenv("MEMORA_CONTEXT_WINDOW", "2048")
    at = opened(caplog)
    assert_refused(at)
    assert "MEMORA_MAX_INPUT_TOKENS, MEMORA_MAX_REPLY_TOKENS and MEMORA_CONTEXT_WINDOW do not fit together" in at.code[0].value


def test_the_openai_backend_without_a_key_is_refused(monkeypatch, caplog) -> None:
    monkeypatch.setenv("MEMORA_BACKEND", "openai")
    at = opened(caplog)
    assert_refused(at)
    assert "OPENAI_API_KEY" in at.code[0].value


def test_well_formed_settings_open_the_page_and_log_nothing(monkeypatch, caplog) -> None:
    monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "true")
    monkeypatch.setenv("MEMORA_MAX_STORE_MB", "5")
    at = opened(caplog)
    assert at.session_state[keys.SETTINGS].locked and at.session_state[keys.SETTINGS].max_store_mb == 5
    assert len(at.chat_input) == 1 and REFUSED not in texts(at)
    assert caplog.records == []


def test_a_secrets_file_that_cannot_be_parsed_is_refused_without_quoting_it(tmp_path, caplog) -> None:
    """Before, Streamlit's parse error (a FileNotFoundError, as "no file" is) opened the page as if there were none."""
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text(f'OPENAI_API_KEY = "{CLASSROOM_KEY}"\nMEMORA_LOCK_SETTINGS = tru\n')
    at = opened(caplog)
    assert_refused(at)
    assert at.code[0].value == "- secrets.toml could not be read (TOMLDecodeError (at line 2, column 24)): fix it or remove it"
    assert CLASSROOM_KEY not in tree_text(at) and CLASSROOM_KEY not in caplog.text


def test_the_issues_empty_lock_key_cap_and_store_are_each_named_on_the_page_and_in_the_log(tmp_path, monkeypatch, caplog) -> None:
    """Issue 39: a file whose values were lost on the way (given, but empty) opened unlocked, offline, uncapped and on
    ~/.memora. Each is a setting to fix, listed at once, and nothing is opened."""
    for name in ("MEMORA_LOCK_SETTINGS", "OPENAI_API_KEY", "MEMORA_MAX_SERVER_TOKENS", "MEMORA_STORE_URL"):
        monkeypatch.setenv(name, " ")
    monkeypatch.setenv("MEMORA_CONVERSATION_IDLE_DAYS", "1000000000")
    at = opened(caplog)
    assert_refused(at)
    listed = at.code[0].value.splitlines()
    assert [line.removeprefix("- ").split(" ", 1)[0] for line in listed] == [
        "MEMORA_LOCK_SETTINGS",
        "MEMORA_MAX_SERVER_TOKENS",
        "MEMORA_STORE_URL",
        "MEMORA_CONVERSATION_IDLE_DAYS",
    ]
    assert all(line.removeprefix("- ") in caplog.text for line in listed)
    assert "the 4 setting problem(s) below" in at.error[0].value
    assert not (tmp_path / ".memora").exists(), "no store or ledger opened anywhere"
