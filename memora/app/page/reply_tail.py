"""The reply job as it grows (``memora.classroom.job``; the page's turn starts and settles it:
``memora.app.page.turn``).

Every run of the script, whatever click caused it, draws the job's ``Progress`` instead of streaming
the reply itself, so no rerun can cut a reply: only Stop, a deletion and an import cancel one
(``settings_panel.discard_job``). While it replies, a fragment (the "tail") redraws the growing
reply a few times a second without rerunning the page, and reruns the whole page when the job's
phase changes, so the history, the panels and the summary status catch up (the next run's
``turn.settle`` shows the job's outcome).
"""

from __future__ import annotations

import streamlit as st

from memora.app.page import render
from memora.app.page import state as keys
from memora.app.page.i18n import t
from memora.classroom.job import Progress, ReplyJob

TAIL_INTERVAL_S = 0.3
"""How often the tail redraws a reply in progress: often enough to read as streaming, each redraw
costs the server a fragment run."""

WATCH_INTERVAL_S = 1.0
"""How often the page looks at a job that has nothing to draw (its summary on the way, after the
reply): the input is enabled by then and only the sidebar waits for the summary, so it is looked for
about a third as often as a reply."""


def render_tail(progress: Progress | None, lang: str) -> None:
    """The job's turn as ``progress`` saw it, redrawn by a fragment until its phase changes; nothing
    without a job.

    A job that had finished when ``progress`` was read reruns the page at once,
    whose ``turn.settle`` shows its outcome. One that finishes after is caught by the
    fragment's first run. Either way the page never waits, input disabled, for
    a click to show what the job did. A reply is redrawn every ``TAIL_INTERVAL_S``; a summary
    on the way, which draws nothing here, is watched every ``WATCH_INTERVAL_S``.
    """
    job: ReplyJob | None = st.session_state[keys.REPLY_JOB]
    if job is None or progress is None:
        return
    if progress.finished:
        st.rerun(scope="app")
    if progress.phase == "replying" and progress.user_text is not None:
        _tail(job, lang)
    else:
        _watch(job, progress.phase)


@st.fragment(run_every=TAIL_INTERVAL_S)
def _tail(job: ReplyJob, lang: str) -> None:
    progress = job.progress
    if progress.phase != "replying" or progress.user_text is None:
        # The reply is committed, failed or stopped: the whole page follows (history, panels, input
        # box).
        st.rerun(scope="app")
    with st.chat_message("user"):
        render.markdown(progress.user_text)
    with st.chat_message("assistant"):
        st.button(
            t(lang, "chat.stop"),
            key=keys.STOP_BUTTON,
            on_click=job.cancel,
            icon=":material/stop_circle:",
        )
        if progress.reply:
            render.markdown(progress.reply)
        else:
            render.caption(t(lang, "chat.waiting"))


@st.fragment(run_every=WATCH_INTERVAL_S)
def _watch(job: ReplyJob, drawn_phase: str) -> None:
    if job.progress.phase != drawn_phase:
        st.rerun(scope="app")  # the summary is in, or why not: the sidebar and the status follow
