"""The summary off the critical path: after a reply, fold what the next turn needs.

The page draws everything first, input box included, and only then folds, so
the user reads and types while the summary request runs; the next message's
``prepare()`` then finds nothing to fold and its reply request goes out at once.
A small status in the sidebar says a summary is being updated.

A fold is tried once per committed reply: ``PREFOLD_AT`` remembers the history
length it was tried at, so a failing summary request is not retried on every
rerun (each widget click). A failure changes nothing in the memory (``prefold``
is transactional); the next ``prepare()`` folds the same messages itself.
"""

from __future__ import annotations

import streamlit as st

from memora.memory import ShortTermMemory
from memora.ui import render
from memora.ui import state as keys
from memora.ui.i18n import error_message, t


def status_slot():
    """A placeholder near the top of the sidebar for the "updating summary" status; call inside ``st.sidebar``."""
    return st.empty()


def prefold_after_reply(memory: ShortTermMemory, lang: str, slot) -> None:
    """Folds now what the next turn is certain to fold, once per new reply; reruns when it did.

    Call last in the script, after the input box is drawn. Does nothing while a
    user message is pending, when the history has not changed since the last
    try, or when ``fold_due()`` finds nothing to fold. On failure it shows a
    translated warning in ``slot`` and leaves the memory as it was.
    """
    state = st.session_state
    if memory.has_pending_turn or state[keys.PREFOLD_AT] == len(memory.history):
        return
    state[keys.PREFOLD_AT] = len(memory.history)
    try:
        due = memory.fold_due()
        # A session at its cap sends nothing more; its next message is refused, translated, before anything is sent.
        memory.limits.check_spend(len(memory.history) // 2, memory.session_total_tokens)
    except ValueError:  # a budget too small for any message, or a cap (LimitReached): the next turn says so
        return
    if due <= memory.summarized_message_count:
        return
    with slot.status(t(lang, "prefold.running"), expanded=False) as status:
        try:
            version = memory.prefold()
        except Exception as error:  # BackendError, SummaryError, or a bug: the next prepare() folds instead
            status.update(label=t(lang, "prefold.failed_label"), state="error", expanded=True)
            render.alert("warning", t(lang, "prefold.failed", reason=error_message(lang, error)))
            return
        if version is not None:
            status.update(label=t(lang, "prefold.done", first=version.folded[0] + 1, last=version.folded[1]), state="complete")
    # The panels above were drawn before the fold; draw them again with the new summary.
    st.rerun()
