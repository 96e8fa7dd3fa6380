"""Driving the page through Streamlit's AppTest: start it, send messages, read what it shows."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.classroom.job import ReplyJob
from memora.memory import ShortTermMemory

APP = str(Path(__file__).resolve().parents[2] / "streamlit_app.py")
ENV_NAMES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "MEMORA_BASE_URL",
    "MEMORA_BACKEND",
    "MEMORA_MODEL",
    "MEMORA_TOKEN_COUNTING",
    "MEMORA_MAX_INPUT_TOKENS",
    "MEMORA_MAX_RECENT_TURNS",
)
"""Environment variables that would change how the page starts; the page tests clear them."""
CLASSROOM_ENV = (
    "MEMORA_LOCK_SETTINGS",
    "MEMORA_MAX_TURNS",
    "MEMORA_MAX_SESSION_TOKENS",
    "MEMORA_MAX_MESSAGE_CHARS",
    "MEMORA_TOKEN_COUNTING",
)
"""The classroom settings a teacher sets in the environment."""
CLASSROOM_KEY = "sk-test-classroom-9b7e2c41"
"""The teacher's key in the classroom tests: it must never reach a page, a log or an export."""


JOB_WAIT_S = 120.0
"""How long ``finish`` waits for a reply job: a bound on a hang, not a measure of speed."""


def new_app(memory: ShortTermMemory | None = None, **secrets: str) -> AppTest:
    """The page after its first run, with ``memory`` in session state and ``secrets`` as st.secrets.

    A conversation long enough to fold is summarized ahead on opening; that job is waited for.
    """
    at = AppTest.from_file(APP, default_timeout=30)
    open_panels(at)
    for name, value in secrets.items():
        at.secrets[name] = value
    if memory is not None:
        at.session_state[keys.MEMORY] = memory
    return finish(at.run())


def open_panels(at: AppTest) -> AppTest:
    """Opens the Teaching tools and Settings panels, as a teacher who clicked them: closed, their widgets are not drawn."""
    at.session_state[keys.TOOLS_PANEL_OPEN] = at.session_state[keys.SETTINGS_PANEL_OPEN] = True
    return at


def open_turn_boxes(at: AppTest, *turns: int) -> AppTest:
    """Opens the chat's boxes of ``turns`` and runs the page, as a reader who clicked them: closed, a box draws only
    its title."""
    for turn in turns:
        at.session_state[keys.turn_box_open(turn)] = True
    return at.run()


def send(at: AppTest, text: str) -> AppTest:
    """Sends ``text`` and waits for its reply job to finish and the page to show its outcome."""
    at.chat_input[0].set_value(text).run()
    assert not at.exception, at.exception
    return finish(at)


def running_job(at: AppTest) -> ReplyJob | None:
    return at.session_state.get(keys.REPLY_JOB)


def finish(at: AppTest) -> AppTest:
    """Waits for the session's reply job, then runs the page as the job's last redraw would, until no job is left.

    That run settles the job (the reply drawn in the history, or the text back in
    the input and why); it may start a summary-only job, which is waited for too.
    """
    job = running_job(at)
    while job is not None:
        assert job.wait(JOB_WAIT_S), "the reply job did not finish"
        at.run()
        assert not at.exception, at.exception
        job = running_job(at)
    return at


def texts(at: AppTest) -> str:
    """Every markdown, caption, text, code and alert on the page, joined."""
    parts = [e.value for kind in ("markdown", "caption", "text", "code", "info", "warning", "error", "success") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def words(message) -> str:
    """A chat message's words as drawn: its Markdown without the number line above them (``#3``)."""
    number_line, _, body = message.markdown[0].value.partition("\n\n")
    assert number_line.startswith(":gray[:small["), f"no number line above {message.markdown[0].value!r}"
    return body


def drawn_words(message) -> str:
    """A chat message's words, with or without a number line above them: the reply being written
    (``reply_tail``) has none yet, a message of the history has one."""
    value = message.markdown[0].value
    return words(message) if value.startswith(":gray[:small[") else value


def number_line(message) -> str:
    """The line a chat message is drawn under: its number, and whether it is folded."""
    return message.markdown[0].value.partition("\n\n")[0]


def expander(at: AppTest, label: str):
    matches = [e for e in at.expander if e.label == label]
    assert matches, f"no expander {label!r} in {[e.label for e in at.expander]}"
    return matches[0]


def tree_text(at: AppTest) -> str:
    """Every element's protobuf on the page, as text: what the browser is sent, widgets' values included."""
    parts: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    # Every node's ``root`` is the whole element tree: main, sidebar, event and bottom containers.
    walk(at.main.root)
    return "\n".join(parts)


def assert_alternating(memory: ShortTermMemory) -> None:
    roles = [m.role for m in memory.history]
    assert roles == ["user", "assistant"] * (len(roles) // 2)


def status_figures(at: AppTest) -> dict[str, str]:
    """The sidebar's one-line Status ("History messages **12** · … · Session total tokens **2,641**"), by label."""
    line = next(m.value for m in at.sidebar.markdown if m.value.count("**") == 10 and " · " in m.value)
    pairs = (part.rsplit(" **", 1) for part in line.split(" · "))
    return {label: value.removesuffix("**") for label, value in pairs}


def ledger_cards(usage) -> list[dict[str, str]]:
    """The Token usage panel's request cards, oldest first: each card's figures, by their label, as drawn."""
    tables = [m.value for m in usage.markdown if m.value.startswith("| Figure | Value |")]
    rows = [[line.strip().strip("|").split(" | ", 1) for line in table.splitlines()[2:]] for table in tables]
    return [{label.strip(): value.strip() for label, value in card} for card in rows]
