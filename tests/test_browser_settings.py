"""Issue 28, item 4, through a real ``streamlit run`` and Chromium: a malformed setting stops the page for every
student (separate browser contexts, as separate laptops), and says so on the page and in the server's log; the
page never opens on defaults (unlocked, offline, on ``~/.memora``). The AppTest half is test_settings_page.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.harness.browser import chromium
from benchmarks.harness.processes import ROOT, streamlit_run
from tests.support.app import CLASSROOM_KEY

REFUSED = "Memora cannot start until the"


def bare_env(home: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORA_"))}
    return {**env, "HOME": str(home), **settings}


def students_see_only_the_refusal(url: str, problems: list[str]) -> None:
    """Two students, each in a context of their own, see the refusal and nothing of the chat."""
    with chromium() as browser:
        for _student in range(2):
            context = browser.new_context()
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(url)
            page.get_by_text(REFUSED).wait_for()
            code = page.get_by_test_id("stCode").inner_text()
            assert [line for line in code.splitlines() if line.strip()] == [f"- {problem}" for problem in problems]
            assert page.get_by_test_id("stChatInputTextArea").count() == 0
            assert page.get_by_text("Offline mode").count() == 0
            assert CLASSROOM_KEY not in page.content()
            context.close()


@pytest.mark.parametrize("where", ["environment", "secrets.toml"])
def test_a_locked_classroom_with_one_bad_setting_refuses_every_student_and_logs_why(where: str, tmp_path: Path) -> None:
    """The report: a key, the lock, a data folder and MEMORA_MAX_STORE_MB=0 opened unlocked, offline, on ~/.memora.
    From ``secrets.toml`` (the global one, under HOME) a typo in the file's syntax is the same failure."""
    data = tmp_path / "classroom-data"
    settings = {"OPENAI_API_KEY": CLASSROOM_KEY, "MEMORA_LOCK_SETTINGS": "true", "MEMORA_DATA_DIR": str(data)}
    if where == "environment":
        env = bare_env(tmp_path, **settings, MEMORA_MAX_STORE_MB="0")
        problems = ["MEMORA_MAX_STORE_MB must be a whole number from 1 to 1000000000, not 0"]
    else:
        (tmp_path / ".streamlit").mkdir()
        lines = [f'{name} = "{value}"' for name, value in settings.items()] + ["MEMORA_MAX_STORE_MB = 1_024_"]
        (tmp_path / ".streamlit" / "secrets.toml").write_text("\n".join(lines) + "\n")
        env = bare_env(tmp_path)
        problems = ["secrets.toml could not be read (TOMLDecodeError (at line 4, column 28)): fix it or remove it"]
    log = ROOT / "test-output" / f"streamlit-settings-refused-{where.replace('.', '-')}.log"
    log.unlink(missing_ok=True)
    with streamlit_run(env, log) as url:
        students_see_only_the_refusal(url, problems)
    logged = log.read_text()
    assert "Memora cannot start: 1 setting(s) must be fixed, then the server restarted:" in logged
    assert logged.count(f"- {problems[0]}") == 2, "once for each student turned away"
    assert CLASSROOM_KEY not in logged
    assert not data.exists() and not (tmp_path / ".memora").exists(), "no store or ledger opened, on either folder"
