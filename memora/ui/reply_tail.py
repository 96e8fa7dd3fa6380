"""The page's side of a reply job (``memora.replies.job``): start it, draw it as it grows, settle what it left.

A submitted message becomes a ``ReplyJob`` owned by the session. Every run of
the script, whatever click caused it, draws the job's ``Progress`` instead of
streaming the reply itself, so no rerun can cut a reply: only Stop, Reset and
an import cancel one (``settings_panel.discard_job``). While it replies, a fragment (the "tail") redraws the
growing reply a few times a second without rerunning the page, and reruns the
whole page when the job's phase changes, so the history, the panels and the
summary status catch up. The first thing each run does is ``settle``: a job
that has finished leaves its outcome (a failed or stopped turn's text back in
the input, and why) and the settings deferred while it ran are applied.
"""

from __future__ import annotations

import streamlit as st

from memora.memory import ShortTermMemory
from memora.replies.job import Progress, ReplyJob
from memora.ui import handover, prefold, render, settings_panel
from memora.ui import state as keys
from memora.ui.conversation import PARAM
from memora.ui.i18n import t
from memora.ui.state import Notice

TAIL_INTERVAL_S = 0.3
"""How often the tail redraws a reply in progress: often enough to read as streaming, each redraw costs the server a fragment run."""


def replying() -> bool:
    """Whether a reply is being written now (a job summarizing after its reply does not count)."""
    job: ReplyJob | None = st.session_state[keys.REPLY_JOB]
    return job is not None and job.progress.phase == "replying"


def settle(memory: ShortTermMemory) -> Progress | None:
    """Applies a finished job's outcome; returns its final ``Progress`` (the summary status draws it), else None.

    Call first on every run, before anything reads the memory. A failed turn's
    text goes back to the input with the reason; a stopped one with
    "Stopped". Settings changed while the job ran are applied now. With no
    job running, a history the page has not summarized ahead yet (one changed with
    no job) gets a summary-only job, once per history length; a restore or an import
    marks its history as done, so opening a conversation sends nothing.
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
            state[keys.NOTICE] = Notice("error", "notice.restored", error=settled.error)
        settings_panel.apply_deferred()
    if state[keys.REPLY_JOB] is None and state[keys.PREFOLD_AT] != len(memory.history):
        state[keys.PREFOLD_AT] = len(memory.history)
        if prefold.fold_is_due(memory):
            state[keys.REPLY_JOB] = ReplyJob(memory, None, after=prefold.summarize_ahead).start()
            handover.track(state[keys.REPLY_JOB], PARAM)
    return settled


def start(memory: ShortTermMemory, text: str) -> None:
    """Starts the turn for ``text``, to be followed by the summary the next turn needs.

    A job still summarizing after the last reply is replaced: the new turn waits
    for its fold on the memory's lock, and a failure of that fold is not shown
    (the new turn's own ``prepare()`` folds what it left).
    """
    job = st.session_state[keys.REPLY_JOB] = ReplyJob(memory, text, after=prefold.summarize_ahead).start()
    handover.track(job, PARAM)  # a reload adopts it, a shutdown waits for it


def current() -> Progress | None:
    """The session's job's progress, read once: the run draws this one snapshot everywhere. None without a job.

    A job may have finished since this run's ``settle`` (a refused connection
    fails in milliseconds); ``render_tail`` then reruns the page to settle it.
    """
    job: ReplyJob | None = st.session_state[keys.REPLY_JOB]
    return None if job is None else job.progress


def history_shown(memory: ShortTermMemory, progress: Progress | None) -> int:
    """How many history messages the page draws from the memory; the tail draws the turn in progress."""
    return progress.base if progress is not None and progress.phase == "replying" else len(memory.history)


def render_tail(progress: Progress | None, lang: str) -> None:
    """The job's turn as ``progress`` saw it, redrawn by a fragment until its phase changes; nothing without a job.

    A job that had finished when ``progress`` was read reruns the page at once,
    whose ``settle`` shows its outcome. One that finishes after is caught by the
    fragment's first run. Either way the page never waits, input disabled, for
    a click to show what the job did.
    """
    job: ReplyJob | None = st.session_state[keys.REPLY_JOB]
    if job is None or progress is None:
        return
    if progress.finished:
        st.rerun(scope="app")
    _tail(job, progress.phase, lang)


@st.fragment(run_every=TAIL_INTERVAL_S)
def _tail(job: ReplyJob, drawn_phase: str, lang: str) -> None:
    progress = job.progress
    if progress.phase != drawn_phase:
        # The reply is committed, failed or stopped: the whole page follows (history, panels, input box).
        st.rerun(scope="app")
    if progress.phase != "replying" or progress.user_text is None:
        return
    with st.chat_message("user"):
        render.markdown(progress.user_text)
    with st.chat_message("assistant"):
        st.button(t(lang, "chat.stop"), key=keys.STOP_BUTTON, on_click=job.cancel, icon=":material/stop_circle:")
        if progress.reply:
            render.markdown(progress.reply)
        else:
            render.caption(t(lang, "chat.waiting"))
