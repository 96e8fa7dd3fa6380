"""The summary off the critical path, in the sidebar: a summary being updated, or why it failed.

The fold runs on the reply's own job (``memora.classroom.job.fold_ahead``), right after the
commit, while the user reads the reply; the next message's turn (``ShortTermMemory.turn``) then
finds nothing to fold and its reply request goes out at once.

A fold is tried once per committed reply (and once for a history that changed
with no job, see ``turn.settle``; a restored or imported conversation sends
nothing until its next message), not on every rerun. A failure changes
nothing in the memory (``prefold`` is transactional); the next turn
folds the same messages itself.
"""

from __future__ import annotations

import streamlit as st

from memora.app.page import render
from memora.app.page.i18n import error_message, t
from memora.classroom.job import Progress


def status_slot():
    """A placeholder near the top of the sidebar for the "updating summary" status; call inside
    ``st.sidebar``."""
    return st.empty()


def render_status(slot, progress: Progress | None, lang: str) -> None:
    """The sidebar status: running while a job summarizes; the reason when the job that just
    finished could not."""
    if progress is None:
        return
    if progress.phase == "summarizing":
        slot.status(t(lang, "prefold.running"), state="running", expanded=False)
    elif progress.phase == "done" and progress.after_error is not None:
        with slot.status(t(lang, "prefold.failed_label"), state="error", expanded=True):
            render.alert(
                "warning",
                t(lang, "prefold.failed", reason=error_message(lang, progress.after_error)),
            )
