"""The terminal REPL, offline (the article's own main loop is in tests/test_article_program.py)."""

import os
import subprocess
import sys
from pathlib import Path

from memora import ShortTermMemory
from memora.app.page.views import fold_event
from memora.app.repl import repl
from memora.teaching.story import story

ROOT = Path(__file__).resolve().parent.parent


def run_repl(memory, lines):
    inputs, output = iter(lines), []
    repl(memory, read=lambda prompt: next(inputs), write=output.append)
    return "\n".join(output)


def test_repl_commands_and_stats(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    out = run_repl(memory, ["one", "two", "three", "history", "context", "summary", "status", "exit"])
    assert "Memora: reply 3" in out
    # The pair that left the window was folded in the background while "three" was
    # being typed, so the third reply did not wait for a summary request.
    assert [kind for kind, _ in backend.billed] == ["reply", "reply", "summary", "reply", "summary"]
    assert backend.summaries[0].new_messages[0].content == "one"
    assert backend.replies[2].messages[0].role == "developer"
    # That fold is told once, as the page tells it: before the turn it served, and in that turn's stats.
    before, after = out.split("Memora: reply 3")
    assert "Summary v1, after reply 2, for turn 3: messages 1–2 folded in" in before.split("Memora: reply 2")[1]
    assert "Newly summarized messages: 2" in after
    assert "Folded for this turn: summary v1, after reply 2, for turn 3 (2 messages)." in after
    assert "Counted input tokens:" in out and "Actual input tokens:" in out
    assert "--- Full Conversation History ---\nuser: one\nassistant: reply 1" in out
    # After the third reply, the background fold also folded the second pair.
    assert "--- Conversation Summary ---\none | reply 1 | two | reply 2" in out
    assert "History messages: 6" in out and "Summarized messages: 4" in out
    assert out.endswith("Bye!")
    assert len(backend.replies) == 3, "commands call no model"


def run_repl_with_prompts(memory, lines):
    """The REPL's output with each prompt in its place among the lines, as a terminal shows them."""
    inputs, output = iter(lines), []

    def read(prompt):
        output.append(prompt)
        return next(inputs)

    repl(memory, read=read, write=output.append)
    return output


def test_repl_tells_the_fold_ahead_under_the_reply_that_caused_it_before_the_next_prompt(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    output = run_repl_with_prompts(memory, ["one", "two", "three", "exit"])
    prompts = [i for i, line in enumerate(output) if line == "\nYou: "]
    second_reply = output.index("Memora: reply 2")
    notice = output.index("Folding messages 1–2 into the summary ahead of the next turn…")
    fold = next(i for i, line in enumerate(output) if line.startswith("Summary v1, after reply 2, for turn 3: messages 1–2 folded in"))
    # Reply 2, its stats, what is being folded, the fold itself, and only then the prompt for message 3.
    assert second_reply < notice < fold == notice + 1 < prompts[2] == fold + 1
    assert "--- Memory Status ---" in output[second_reply + 1]
    # The first reply left nothing to fold: no notice under it, and its prompt follows its stats.
    assert prompts[1] == output.index("Memora: reply 1") + 2
    # Reply 3 caused the second fold, told under it in the same way.
    third_reply = output.index("Memora: reply 3")
    assert output[third_reply + 2 : third_reply + 4] == [
        "Folding messages 3–4 into the summary ahead of the next turn…",
        fold_event(memory, story(memory).folds[1], "en"),
    ]
    assert output.count("Folding messages 1–2 into the summary ahead of the next turn…") == 1, "each fold is told once"
    assert [kind for kind, _ in backend.billed] == ["reply", "reply", "summary", "reply", "summary"]


def test_repl_says_when_the_fold_ahead_failed_before_the_next_prompt_and_the_next_turn_folds_itself(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    backend.fail_next("summary")
    output = run_repl_with_prompts(memory, ["one", "two", "three", "exit"])
    failed = output.index(
        "Folding ahead of the next turn failed (scripted failure); the next turn folds the same messages itself."
    )
    assert output[failed - 1] == "Folding messages 1–2 into the summary ahead of the next turn…"
    assert output[failed + 1] == "\nYou: "
    assert not any(line.startswith("Summary v1") for line in output[:failed]), "no fold is told that did not happen"
    # The third turn folded messages 1–2 before its reply; its stats say so.
    assert backend.summaries[1].new_messages[0].content == "one"
    assert "Newly summarized messages: 2" in output[output.index("Memora: reply 3") + 1]


def test_repl_streams_each_piece_of_the_reply_as_it_arrives(backend):
    inputs, lines, parts = iter(["hello", "exit"]), [], []
    repl(ShortTermMemory(backend), read=lambda prompt: next(inputs), write=lines.append, write_part=parts.append)
    # The fake streams "reply " then "1": each piece is written as it comes, before the stats.
    assert parts == ["Memora: ", "reply ", "1", "\n"]
    assert not any("reply 1" in line for line in lines)
    assert any("--- Memory Status ---" in line for line in lines)


def test_repl_ends_a_broken_streamed_line_before_reporting_the_failure(backend):
    backend.fail_next("reply_midstream")
    inputs, lines, parts = iter(["hello", "exit"]), [], []
    repl(ShortTermMemory(backend), read=lambda prompt: next(inputs), write=lines.append, write_part=parts.append)
    assert parts == ["Memora: ", "reply ", "\n"]
    assert "Request failed: scripted failure" in lines


def test_repl_reports_a_failure_and_keeps_going(backend):
    memory = ShortTermMemory(backend)
    backend.fail_next("reply")
    out = run_repl(memory, ["hello", "hello again", "exit"])
    assert "Request failed: scripted failure" in out
    assert [m.content for m in memory.history] == ["hello again", "reply 2"]


def test_repl_ends_on_end_of_input(backend):
    def read(prompt):
        raise EOFError

    output = []
    repl(ShortTermMemory(backend), read=read, write=output.append)
    # The cursor was left on the "You: " prompt: the farewell gets a line of its own.
    assert output[-2:] == ["", "Bye!"]


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORA_"))}
    return {**env, "PYTHONPATH": str(ROOT)}


def test_python_m_memora_runs_offline():
    import memora

    script = "My English level is B1.\nstatus\nusage\nexit\n"
    result = subprocess.run(
        [sys.executable, "-m", "memora"], input=script, capture_output=True, text=True, cwd=ROOT, env=clean_env(), timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Memora {memora.__version__} (the article's v0.7 loop)\n"), "one version string"
    assert result.stdout.endswith("Bye!\n"), "the farewell ends its line"
    # Offline, nothing speaks of a server except to say there is none: not the banner, the stats, status or usage.
    about_a_server = [line for line in result.stdout.splitlines() if "server" in line.lower() and "has no server to bill" not in line]
    assert about_a_server == []
    assert "budget counted by: local o200k_base (offline: nothing is billed)" in result.stdout
    assert "~ counted locally: the offline engine has no server to bill" in result.stdout
    assert "Backend: Offline (no language model)" in result.stdout
    assert "Offline mode, no language model." in result.stdout
    assert "(counted locally: the offline engine has no server to bill)" in result.stdout
    assert "billed by the server" not in result.stdout
    assert "the server reported no usage" not in result.stdout, "offline, there is no server to speak of"
    assert "none to show (offline: both figures are local counts)" in result.stdout
    assert "History messages: 2" in result.stdout


def test_python_m_memora_help_and_version_answer_without_starting_the_repl():
    import tomllib

    import memora

    for flag, expected in (("--help", "usage: python -m memora"), ("--version", f"Memora {memora.__version__}")):
        # No input at all: a REPL started by mistake would print its banner and "Bye!" on end of input.
        result = subprocess.run(
            [sys.executable, "-m", "memora", flag], input="", capture_output=True, text=True, cwd=ROOT, env=clean_env(), timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert expected in result.stdout
        assert "Bye!" not in result.stdout and "You:" not in result.stdout
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" in project["dynamic"], "one version string: memora.__version__"


def test_python_m_memora_applies_the_session_caps():
    result = subprocess.run(
        [sys.executable, "-m", "memora"],
        input="Hello.\nHello again.\nexit\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean_env(), "MEMORA_MAX_TURNS": "1"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Request failed: This session has reached its limit of 1 turns." in result.stdout
    assert result.stdout.count("--- Memory Status ---") == 1


def test_replies_are_printed_as_plain_text_even_when_markers_arrive_split():
    from memora.app.repl import PlainText

    plain = PlainText()
    pieces = ["**Offline", " mode.*", "* Summary:\n", "> - B1", " level\n", "# Title\n", "a__b__c"]
    assert "".join(plain.feed(p) for p in pieces) + plain.flush() == "Offline mode. Summary:\n- B1 level\nTitle\nabc"


def test_every_documented_python_m_memora_command_exists():
    """A moved module leaves no doc naming its old command (``python -m memora.probe`` became ``memora.teaching.probe``)."""
    import importlib.util
    import re

    docs = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "memora" / "app" / "page" / "locales").glob("*.toml")),
    ]
    named = {(path.name, name) for path in docs for name in re.findall(r"python -m (memora(?:\.\w+)*)", path.read_text())}
    assert ("README.md", "memora") in named and ("zh-TW.toml", "memora.app.probe") in named
    for doc, name in sorted(named):
        spec = importlib.util.find_spec(name)
        runnable = spec is not None and (spec.submodule_search_locations is None or importlib.util.find_spec(f"{name}.__main__"))
        assert runnable, f"{doc} names `python -m {name}`, which does not run"


def test_python_m_memora_refuses_malformed_settings_listing_each_and_never_starts_on_defaults(tmp_path):
    """Issue 28: a typo must not start the REPL on defaults; every malformed setting is named, no key is shown."""
    key = "sk-cli-classroom-key-5e61f0"
    env = {
        **clean_env(),
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": key,
        "MEMORA_LOCK_SETTINGS": "ture",
        "MEMORA_MAX_STORE_MB": "0",
        "MEMORA_BASE_URL": f"localhost:11434/v1?key={key}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "memora"], input="Hello.\nexit\n", capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert result.returncode == 2
    assert result.stdout == "", "no banner, no reply: nothing ran"
    lines = result.stderr.splitlines()
    assert lines[0] == "Configuration error: Memora cannot start until these settings are fixed:"
    assert lines[1:] == [  # in the order memora.app.settings.Settings declares them
        "  - MEMORA_LOCK_SETTINGS must be true or false (or 1/0, yes/no, on/off), not 'ture'",
        "  - MEMORA_BASE_URL must be an http:// or https:// URL with a host, such as http://localhost:11434/v1"
        " (the value is not shown: it may hold a password)",
        "  - MEMORA_MAX_STORE_MB must be a whole number from 1 to 1000000000, not 0",
    ]
    assert key not in result.stderr
    assert not (tmp_path / ".memora").exists(), "nothing was opened on the default data folder"


def test_python_m_memora_refuses_limits_that_do_not_fit_together():
    result = subprocess.run(
        [sys.executable, "-m", "memora"],
        input="exit\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean_env(), "MEMORA_MAX_INPUT_TOKENS": "40"},
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "  - MEMORA_MAX_INPUT_TOKENS, MEMORA_MAX_REPLY_TOKENS and MEMORA_CONTEXT_WINDOW do not fit together:" in result.stderr
