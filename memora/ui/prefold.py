"""The summary off the critical path: after a reply, fold what the next turn needs.

The fold runs on the reply's own job (``memora.replies.job``), right after the
commit, while the user reads the reply; the next message's ``prepare()`` then
finds nothing to fold and its reply request goes out at once. A small status in
the sidebar says a summary is being updated, or why it could not be.

A fold is tried once per committed reply (and once for a history that changed
with no job, see ``reply_tail.settle``; a restored or imported conversation sends
nothing until its next message), not on every rerun. A failure changes
nothing in the memory (``prefold`` is transactional); the next ``prepare()``
folds the same messages itself.
"""

from __future__ import annotations

import streamlit as st

from memora.memory import ShortTermMemory, SummaryVersion
from memora.replies.job import Progress
from memora.ui import render
from memora.ui.i18n import error_message, t


def status_slot():
    """A placeholder near the top of the sidebar for the "updating summary" status; call inside ``st.sidebar``."""
    return st.empty()


def fold_is_due(memory: ShortTermMemory) -> bool:
    """Whether ``summarize_ahead`` would send a summary request now; False with a user message pending.

    A budget too small for any message, or a session at its cap, gives False:
    the next message is refused, translated, before anything is sent.
    """
    if memory.has_pending_turn:
        return False
    try:
        due = memory.fold_due()
        memory.limits.check_spend(len(memory.history) // 2, memory.session_total_tokens)
    except ValueError:  # LimitReached and ContextBudgetError are ValueErrors
        return False
    return due > memory.summarized_message_count


def summarize_ahead(memory: ShortTermMemory) -> SummaryVersion | None:
    """Folds now what the next turn is certain to fold; None when nothing is due. Runs on a reply job's thread.

    Raises what the summary request raises (BackendError, SummaryError); the memory is then unchanged.
    """
    with memory.lock:
        return memory.prefold() if fold_is_due(memory) else None


def render_status(slot, progress: Progress | None, lang: str) -> None:
    """The sidebar status: running while a job summarizes; the reason when the job that just finished could not."""
    if progress is None:
        return
    if progress.phase == "summarizing":
        slot.status(t(lang, "prefold.running"), state="running", expanded=False)
    elif progress.phase == "done" and progress.after_error is not None:
        with slot.status(t(lang, "prefold.failed_label"), state="error", expanded=True):
            render.alert("warning", t(lang, "prefold.failed", reason=error_message(lang, progress.after_error)))
