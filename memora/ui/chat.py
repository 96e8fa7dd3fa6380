"""The chat column: history, one turn at a time, commands, notices and the input box.

A submitted message is queued by the input's callback and handled in the
next script run, above the input box; the input is drawn last, so a failed
turn can put the user's text back into it in the same run.
"""

from __future__ import annotations

import streamlit as st

from memora.memory import ShortTermMemory, TurnStats
from memora.ui import render
from memora.ui import state as keys
from memora.ui.i18n import error_message, t
from memora.ui.state import Notice, TurnOutcome
from memora.ui.views import message_marks, parse_command, run_command

RECENT_MESSAGES = 20
"""Messages drawn in full on every run; older ones wait in a collapsed, lazily drawn expander."""


def render_header(memory: ShortTermMemory, lang: str) -> None:
    st.title(t(lang, "page.title"))
    render.caption(t(lang, "page.caption"))
    if memory.backend.offline:
        render.alert("info", t(lang, "page.offline_banner") + "\n\n" + t(lang, "page.offline_howto"), icon=":material/cloud_off:")
    else:
        render.caption(t(lang, "page.online_caption", backend=memory.backend.label, model=memory.model))


def render_history(memory: ShortTermMemory, lang: str, recent: int = RECENT_MESSAGES) -> None:
    """Every message of the history; the oldest beyond ``recent`` only when their expander is open.

    The split point is kept even so that a user message and its reply stay together.
    """
    marks = message_marks(memory)
    split = max(0, len(memory.history) - recent)
    split -= split % 2
    if split:
        older = st.expander(t(lang, "chat.older", count=split), key=keys.OLDER_MESSAGES_OPEN, on_change="rerun", icon=":material/history:")
        with older:
            if older.open:
                for index in range(split):
                    _render_message(memory, index, marks[index], lang)
            else:
                render.caption(t(lang, "chat.older_hint", count=len(memory.history) - split))
    for index in range(split, len(memory.history)):
        _render_message(memory, index, marks[index], lang)


def _render_message(memory: ShortTermMemory, index: int, mark: str, lang: str) -> None:
    message = memory.history[index]
    with st.chat_message(message.role):
        if mark == "summarized":
            render.caption(":material/inventory_2: " + t(lang, "chat.folded"))
        render.markdown(message.content)
        stats = memory.turn_stats.get(index)
        if stats is not None and stats.cut and memory.max_reply_tokens is not None:
            render.caption(":material/content_cut: " + t(lang, "chat.cut", cap=memory.max_reply_tokens))
        if stats is not None and stats.over_budget:
            render.alert(
                "warning",
                t(lang, "chat.over_budget", billed=stats.input_tokens, budget=stats.input_budget, counted=stats.counted_input_tokens),
                icon=":material/warning:",
            )
        if stats is not None:
            with st.expander(t(lang, "chat.stats", turn=stats.turn), icon=":material/analytics:"):
                render.markdown(stats_table(stats, lang))
                if memory.backend.offline:
                    render.caption(t(lang, "stats.offline_note"))


def stats_table(stats: TurnStats, lang: str) -> str:
    """The article's per-turn block as a Markdown table; estimated figures say so."""
    actual = t(lang, "stats.not_reported") if stats.input_tokens is None else f"{stats.input_tokens:,}"
    if stats.estimated and stats.input_tokens is not None:
        actual = t(lang, "stats.estimated", value=actual)
    elif stats.implausible:
        actual = t(lang, "stats.implausible", value=actual)
    output = t(lang, "stats.not_reported") if stats.output_tokens is None else f"{stats.output_tokens:,}"
    rows = [
        ("stats.counted_input", f"{stats.counted_input_tokens:,}"),
        ("stats.actual_input", actual),
        ("stats.output", output),
        ("stats.summary", f"{stats.summary_token_usage:,}"),
        ("stats.messages_sent", f"{stats.context_messages}"),
        ("stats.newly_summarized", f"{stats.newly_summarized_count}"),
        ("stats.session_total", f"{stats.session_total_tokens:,}"),
    ]
    head = f"| {t(lang, 'stats.figure')} | {t(lang, 'stats.value')} |\n|---|--:|\n"
    return head + "\n".join(f"| {t(lang, key)} | {value} |" for key, value in rows)


def queue_submission() -> None:
    """The input's callback: keeps the text for this run and clears the last run's messages."""
    state = st.session_state
    state[keys.PENDING_TEXT] = state[keys.CHAT_INPUT]
    state[keys.NOTICE] = None
    state[keys.COMMAND] = None


INTERRUPTED_TURN_WAIT_S = 15.0
"""How long a run waits for an interrupted run's turn to roll back before it draws the page."""


def handle_pending(memory: ShortTermMemory, lang: str) -> None:
    """Runs the queued message: a command, a notice for an empty one, or a model turn."""
    state = st.session_state
    text = state[keys.PENDING_TEXT]
    state[keys.PENDING_TEXT] = None
    if text is None:
        return
    if not text.strip():
        state[keys.NOTICE] = Notice("warning", "notice.empty")
        return
    if refused_before_sending(memory, text):
        return
    command = parse_command(text)
    if command is not None:
        state[keys.COMMAND] = command
        return
    run_turn(memory, text, lang)


def stop_clicked() -> None:
    """The Stop button's callback, run before the next run: that run says the turn was stopped."""
    st.session_state[keys.STOP_CLICKED] = True


def settle_interrupted_turn(memory: ShortTermMemory, wait_s: float = INTERRUPTED_TURN_WAIT_S) -> None:
    """Brings back the text and the reason of a turn that an interrupted run could not report.

    A run interrupted mid-turn rolls its turn back and writes the outcome to the
    session's ``TurnOutcome``. Under ``runner.fastReruns`` (on unless
    .streamlit/config.toml turns it off) Streamlit starts the next run at once,
    while the old one may still wait for the model's next bytes with its user
    message pending; this run then waits, up to ``wait_s``, for that rollback, so
    it neither draws the half-finished turn nor starts a second one on top of it.
    The page calls it first, before anything reads the memory.
    """
    # The old run holds the memory's lock for its whole turn: taking it waits for the rollback, without polling.
    if memory.lock.acquire(timeout=wait_s):
        memory.lock.release()
    state = st.session_state
    outcome: TurnOutcome = state[keys.TURN_OUTCOME]
    if outcome.restore_text is not None:
        state[keys.RESTORE_TEXT] = outcome.restore_text
        state[keys.NOTICE] = Notice("info", "notice.stopped") if state[keys.STOP_CLICKED] else outcome.notice
        outcome.restore_text = outcome.notice = None
    state[keys.STOP_CLICKED] = False


def refused_before_sending(memory: ShortTermMemory, text: str) -> bool:
    """Refuses, before it is drawn or sent, a message no turn could take; its text goes back to the input.

    A 200,000-character paste must not travel back to the browser as a chat
    message, nor be tokenized: the character cap is checked first. Commands
    are short, so the cap applies to them too; the other checks only to messages.
    """
    state = st.session_state
    try:
        if parse_command(text) is None:
            memory.check_new_message(text)
        else:
            memory.limits.check(text, 0, 0)
    except ValueError as error:  # LimitReached and ContextBudgetError are ValueErrors
        state[keys.NOTICE] = Notice("error", "notice.restored", error=error)
        state[keys.RESTORE_TEXT] = text
        return True
    return False


def run_turn(memory: ShortTermMemory, text: str, lang: str) -> None:
    """Streams one turn into the chat, then reruns so the whole page shows the new state.

    The memory's ``turn`` rolls the user message back on any failure,
    BaseException included (Streamlit's stop and rerun), so the ``finally``
    here only has to give the text back to the input box and say why.
    """
    state = st.session_state
    # Fetched now: once Streamlit stops this run, st.session_state can no longer be written.
    outcome: TurnOutcome = state[keys.TURN_OUTCOME]
    committed = False
    try:
        with st.chat_message("user"):
            render.markdown(text)
        with st.chat_message("assistant"):
            # A click reruns the page: Streamlit interrupts this run at the reply's next word, the turn
            # rolls back, and the next run draws the page at once (Streamlit's own Stop leaves it half-drawn).
            st.button(t(lang, "chat.stop"), key=keys.STOP_BUTTON, on_click=stop_clicked, icon=":material/stop_circle:")
            with memory.turn(text) as turn:
                render.stream(turn.stream())
            committed = turn.committed
    except Exception as error:
        outcome.notice = Notice("error", "notice.restored", error=error)
    finally:
        if not committed:
            outcome.restore_text = text
            outcome.notice = outcome.notice or Notice("warning", "notice.interrupted")
            # Shown in this run's last moments when Streamlit allows it; settle_interrupted_turn
            # brings them back in the next run in any case.
            state[keys.RESTORE_TEXT] = text
            state[keys.NOTICE] = outcome.notice
    st.rerun()


def render_command(memory: ShortTermMemory, lang: str) -> None:
    command = st.session_state[keys.COMMAND]
    if command is None:
        return
    output = run_command(memory, *command, lang)
    with st.container(border=True):
        if output.error:
            render.alert("warning", output.body, icon=":material/help:")
        else:
            render.markdown(f"**{output.title}**")
            render.code(output.body, language=None, wrap_lines=True)
        render.caption(t(lang, "cmd.caption"))


def render_notice(lang: str) -> None:
    notice: Notice | None = st.session_state[keys.NOTICE]
    if notice is None:
        return
    params = dict(notice.params)
    if notice.error is not None:
        params["reason"] = error_message(lang, notice.error)
    render.alert(notice.level, t(lang, notice.key, **params))


def render_input(lang: str) -> None:
    """The chat input, drawn last; refilled with the text of a turn that failed."""
    state = st.session_state
    restore = state[keys.RESTORE_TEXT]
    if restore is not None:
        # Setting a chat_input's value through its key before it is drawn needs Streamlit 1.47+.
        state[keys.CHAT_INPUT] = restore
        state[keys.RESTORE_TEXT] = None
    st.chat_input(t(lang, "chat.placeholder"), key=keys.CHAT_INPUT, on_submit=queue_submission, submit_mode="disable")
