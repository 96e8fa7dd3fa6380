"""The page's turn, in one place: from the text the chat input submits to the reply job that sends
it, and back.

1. ``queue`` (the input's callback) keeps the submitted text for the run it causes.
2. At the top of that run, ``take`` reads it once into a ``Submission``: the text, the command it
   names (None for a message) and the verdict of the checks, each run once. A refused text goes back
   to the input with the reason; a command is drawn above the input (``chat.render_command``).
3. A message that passes becomes the session's ``ReplyJob`` (``start``): on its own thread it sends
   the request, streams the reply, commits it, then folds ahead what the next turn will fold
   (``memora.classroom.job.fold_ahead``), so no rerun can cut a reply
   (``memora.app.page.reply_tail`` draws it as it grows). The job is registered for a reload (F5)
   and a shutdown (``memora.app.page.handover``).
4. The next runs begin with ``settle``: a finished job leaves its outcome (a failed or stopped
   turn's text back in the input, and why) and the settings deferred while it ran are applied.

Only a message that no turn could take is refused here, before it is drawn or sent; ``memory.turn``
keeps its own guard for callers that did not ask first (the REPL, the article's loop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from memora.app.page import conversation, handover, render, settings_panel
from memora.app.page import state as keys
from memora.app.page.conversation import PARAM, cap_notice
from memora.app.page.i18n import t
from memora.app.page.state import Notice
from memora.app.page.views import parse_command
from memora.backends import OfflineBackend
from memora.classroom.job import Progress, ReplyJob, fold_ahead
from memora.classroom.server_budget import ServerBudgetUnavailable
from memora.classroom.store.keeper import ConversationKeeper
from memora.memory import ShortTermMemory


@dataclass(frozen=True)
class Submission:
    """One submitted text, read once: ``command`` is its ``/command`` as (name, arguments), None for
    a message; ``refusal`` is the checks' verdict, None when it goes ahead, else the notice that
    says why not; ``behind``: the store holds a later version of this tab's conversation, to open
    before the message is sent (nothing is booked).

    A refused text goes back into the input (``keeps_text``), except a blank one: there is nothing
    to keep.
    """

    text: str
    command: tuple[str, str] | None
    refusal: Notice | None = None
    behind: bool = False

    @property
    def keeps_text(self) -> bool:
        return self.refusal is not None and self.refusal.key != "notice.empty"


def read(
    text: str,
    memory: ShortTermMemory,
    keeper: ConversationKeeper | None,
    busy: bool,
    catch_up: bool = True,
    on_wait: Callable[[], None] | None = None,
) -> Submission:
    """The verdict on ``text``, each check run once, in the order that sends and draws the least.

    ``busy``: a reply is being written (the input is disabled then, but a request can be crafted).
    The character cap comes before any tokenizing, so a pasted book is never counted, drawn or sent;
    commands are short, so it applies to them too, but the other checks only to messages
    (``memory.plan(text)``: the session caps, then a message too big for the budget alone). A store
    cap refuses a message whose turn could not be saved at its largest: no reply is billed for it.
    So does a conversation deleted (or a browser forgotten) in another tab, and a cap that would
    refuse the copy this turn must make when another tab saved or is sending on the conversation: it
    says to reload, never forks into a conversation it cannot keep. A message that passes has that
    room booked in the store until its job ends (``start``). With ``catch_up``, a message whose
    conversation another tab or process saved since, while this tab holds nothing unsaved, comes
    back ``behind`` instead (``ConversationKeeper.room``); while a turn on it runs elsewhere (a
    process stopping mid-reply), it first waits for that turn's save, and ``on_wait`` is called once
    as the wait begins.
    """
    command = parse_command(text)
    if busy:
        return Submission(text, command, Notice("warning", "notice.busy"))
    if not text.strip():
        return Submission(text, command, Notice("warning", "notice.empty"))
    try:
        if command is None:
            memory.plan(text)
        elif memory.limits.caps is not None:
            memory.limits.caps.check(text, 0, 0)
    except ValueError as error:  # LimitReached and ContextBudgetError are ValueErrors
        return Submission(text, command, Notice("error", "notice.restored", error=error))
    cap = (
        None
        if command is not None or keeper is None
        else keeper.room(text, catch_up=catch_up, on_wait=on_wait)
    )
    if command is None and keeper is not None and keeper.behind:
        # room() ran for this message and said so
        return Submission(text, command, behind=True)
    if cap is None:
        return Submission(text, command)
    # Nothing to export or keep in an empty conversation: its notice says only what to do next.
    if not memory.history:
        prefix = "conversation.cap_new"
    elif keeper is not None and keeper.would_fork:
        prefix = "conversation.cap_fork"
    else:
        prefix = "conversation.cap"
    return Submission(text, command, cap_notice(cap, prefix))


def _say_finishing(lang: str) -> None:
    # Drawn while this run waits in ``room``: Streamlit sends it at once, and the next run (the
    # reply's) replaces it.
    render.alert("info", t(lang, "conversation.finishing"), icon=":material/hourglass_top:")


def queue(text: str | None = None) -> None:
    """The input's callback: keeps the text for this run and clears the last run's messages.

    ``text``: a submission the callback never saw (``catch_up``); by default, the input's own value.
    """
    state = st.session_state
    state[keys.PENDING_TEXT] = state[keys.CHAT_INPUT] if text is None else text
    state[keys.NOTICE] = None
    state[keys.COMMAND] = None


def catch_up(submitted: str | None, took: bool) -> None:
    """Queues a submission that reached this run with no callback; runs the page again to take it.

    Streamlit calls ``on_submit`` only for a widget this session has drawn before. The first run of
    a session that a message opens, such as a page reconnected to another process behind the
    balancer after its own one stopped, gets the message as the input's value and no callback:
    without this it would be dropped, neither sent nor given back. ``took`` is ``take``'s answer:
    when the callback ran, the text was taken already.
    """
    if submitted is not None and not took:
        queue(submitted)
        st.rerun()


def take(memory: ShortTermMemory) -> bool:
    """Takes the queued text, if any: a refusal's notice (its text back in the input), a command, or
    a reply job. Returns whether there was one (``catch_up`` asks)."""
    state = st.session_state
    text = state[keys.PENDING_TEXT]
    state[keys.PENDING_TEXT] = None
    if text is None:
        return False
    on_wait = lambda: _say_finishing(state[keys.LANG])  # noqa: E731
    if not replying() and conversation.wait_for_finishing(state, on_wait):
        # this run opened the version a stopping process saved; the next one sends the message on it
        queue(text)
        state[keys.NOTICE] = state[keys.NOTICE] or conversation.caught_up_notice()
        st.rerun()
    submission = read(text, memory, state[keys.CONVERSATION], busy=replying(), on_wait=on_wait)
    if submission.behind:
        if conversation.catch_up(state):
            # the turn it waited for has ended: nothing left to look for
            state[keys.FINISHING] = False
            notice = state[keys.NOTICE]
            queue(text)  # this run opened the later version; the next one sends the message on it
            state[keys.NOTICE] = notice or conversation.caught_up_notice()
            st.rerun()
        # as a copy, as before
        submission = read(text, memory, state[keys.CONVERSATION], busy=replying(), catch_up=False)
    if submission.refusal is not None:
        state[keys.NOTICE] = submission.refusal
        if submission.keeps_text:
            state[keys.RESTORE_TEXT] = text
    elif submission.command is not None:
        state[keys.COMMAND] = submission.command
    else:
        start(memory, text)
    return True


def start(memory: ShortTermMemory, text: str) -> None:
    """Starts the turn for ``text``, to be followed by the fold the next turn needs.

    A job still summarizing after the last reply is replaced: the new turn waits
    for its fold on the memory's lock, and a failure of that fold is not shown
    (the new turn's own plan folds what it left). When its job ends, however it
    ends, the store room ``read`` booked for the turn is given back (``handover.turn_ended``).
    """
    keeper: ConversationKeeper | None = st.session_state[keys.CONVERSATION]
    st.session_state[keys.SENT_HERE] = True
    speak(memory, st.session_state[keys.LANG])
    _run(
        ReplyJob(
            memory,
            text,
            after=fold_ahead,
            on_end=None if keeper is None else lambda: handover.turn_ended(keeper),
        )
    )


def speak(memory: ShortTermMemory, lang: str) -> None:
    """The offline engine replies in the page's language (``lang``); a model answers in whatever
    language it will.

    Set before each turn, so a switch of language applies from the next reply on; the engine sits
    behind the session's guard (``GuardedBackend.inner``).
    """
    engine = getattr(memory.server.backend, "inner", memory.server.backend)
    if isinstance(engine, OfflineBackend):
        engine.language = lang


def _run(job: ReplyJob) -> None:
    st.session_state[keys.REPLY_JOB] = job.start()
    handover.track(job, PARAM)  # a reload adopts it, a shutdown waits for it


def replying() -> bool:
    """Whether a reply is being written now (a job summarizing after its reply does not count)."""
    job: ReplyJob | None = st.session_state[keys.REPLY_JOB]
    return job is not None and job.progress.phase == "replying"


def settle(memory: ShortTermMemory) -> Progress | None:
    """Applies a finished job's outcome; returns its final ``Progress`` (the summary status draws
    it), else None.

    Call first on every run, before anything reads the memory. A failed turn's text goes back to the
    input with the reason; a stopped one with "Stopped". Settings changed while the job ran are
    applied now. With no job running, a history the page has not summarized ahead yet (one changed
    with no job) gets a summary-only job when the memory says a fold is due, once per history
    length; a restore or an import marks its history as done, so opening a conversation sends
    nothing.
    """
    state = st.session_state
    job: ReplyJob | None = state[keys.REPLY_JOB]
    settled = None
    if job is not None and job.progress.finished:
        settled = job.progress
        state[keys.REPLY_JOB] = None
        state[keys.PREFOLD_AT] = len(memory.history)
        if settled.phase == "stopped":
            state[keys.RESTORE_TEXT] = settled.user_text
            state[keys.NOTICE] = Notice("info", "notice.stopped")
        elif settled.phase == "failed":
            state[keys.RESTORE_TEXT] = settled.user_text
            state[keys.NOTICE] = failed_notice(settled.error)
        settings_panel.apply_deferred()
    if state[keys.REPLY_JOB] is None and state[keys.PREFOLD_AT] != len(memory.history):
        state[keys.PREFOLD_AT] = len(memory.history)
        if _fold_due(memory):
            _run(ReplyJob(memory, None, after=fold_ahead))
    return settled


def failed_notice(error: BaseException | None) -> Notice:
    """A failed turn's notice: "not sent" only when a cap or the budget refused the message before
    its reply request left (a ``ValueError``: ``LimitReached``, ``ContextBudgetError``; or
    ``ServerBudgetUnavailable``); else "got no reply", since its requests may have been sent, tried
    again and billed (the error says so)."""
    refused = isinstance(error, ValueError | ServerBudgetUnavailable)
    return Notice("error", "notice.restored" if refused else "notice.failed", error=error)


def _fold_due(memory: ShortTermMemory) -> bool:
    # The memory's own answer, asked once; False where it refuses to plan (a message pending in
    # another tab's job, a budget too small for any message): the job's fold_ahead asks the session
    # caps.
    try:
        return memory.plan().fold > 0
    except ValueError:
        return False


def current() -> Progress | None:
    """The session's job's progress, read once: the run draws this one snapshot everywhere. None
    without a job.

    A job may have finished since this run's ``settle`` (a refused connection
    fails in milliseconds); ``reply_tail.render_tail`` then reruns the page to settle it.
    """
    job: ReplyJob | None = st.session_state[keys.REPLY_JOB]
    return None if job is None else job.progress


def history_shown(memory: ShortTermMemory, progress: Progress | None) -> int:
    """How many history messages the page draws from the memory; the tail draws the turn in
    progress."""
    return (
        progress.base
        if progress is not None and progress.phase == "replying"
        else len(memory.history)
    )
