"""The page's conversation id: open the one in the URL, keep it saved, say where it stands.

The id travels in the page's URL as ``?c=<id>`` (``st.query_params``), written after the first
successful save, so a reload, a bookmark or a server restart opens the same conversation. "New
conversation" (Reset) and an import start a new id; the old conversation stays in the store as it was.
Saving is the memory's ``on_change`` hook (``memora.store.keeper``): it may run in a worker thread,
so it writes nothing to ``st.session_state``; this module reads the keeper's state on each run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import streamlit as st

from memora.memory import ShortTermMemory
from memora.settings import Settings
from memora.store import ConversationStore, IdleSweep, is_conversation_id, open_store
from memora.store.keeper import ConversationKeeper, Reopened, reopen
from memora.ui import render
from memora.ui import state as keys
from memora.ui.i18n import LANGUAGES, error_message, t
from memora.ui.state import Notice, token_counter_for

PARAM = "c"
"""The query parameter that carries the conversation id."""


@st.cache_resource(show_spinner=False)
def shared_store(url: str, idle_days: int) -> tuple[ConversationStore, IdleSweep] | None:
    """One store per URL for the whole server process (its sessions share the connection), with its idle sweep."""
    store = open_store(url)
    return None if store is None else (store, IdleSweep(store, timedelta(days=idle_days)))


def keep(state: Any) -> ConversationKeeper | None:
    """Call once per run, after ``setup_state`` and before anything draws the memory.

    On a session's first run it opens the conversation the URL names. On later runs it follows the
    session's memory: a new memory object (Reset, an import) starts a new id (an imported one is
    saved at once); a save that failed is retried, and a language, budget, window or fold policy changed
    since the last save is saved; the URL follows the id once it is saved.
    Returns the keeper, or None when conversations are not kept (``MEMORA_STORE_URL=off``).
    """
    if not state[keys.CONVERSATION_OPENED]:
        state[keys.CONVERSATION_OPENED] = True
        if state[keys.CONVERSATION] is None:  # a test may have put its own keeper in, as it may a memory
            state[keys.CONVERSATION] = open_conversation(state)
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    if keeper is None:
        return None
    keeper.language = state[keys.LANG]
    memory: ShortTermMemory = state[keys.MEMORY]
    if keeper.memory is None:
        keeper.attach(memory)
    elif memory is not keeper.memory:
        keeper.start_new(memory)
        if memory.history:
            keeper.save(memory, wait=False)
    elif keeper.retry():
        keeper.save_changed_choices()
    _sync_url(keeper)
    return keeper


def open_conversation(state: Any) -> ConversationKeeper | None:
    """The keeper for the conversation in ``?c=``, restored into the session; a new one when there is none."""
    settings: Settings = state[keys.SETTINGS]
    opened = shared_store(settings.conversation_store_url, settings.conversation_idle_days)
    if opened is None:
        return None
    store, sweep = opened
    session: ShortTermMemory = state[keys.MEMORY]
    result = reopen(
        store,
        st.query_params.get(PARAM),
        session,
        locked=settings.locked,
        token_counter=token_counter_for(settings, session.backend),
        sweep=sweep,
    )
    if result.memory is not None:
        _continue_with(state, result)
    elif result.outcome != "new":
        state[keys.NOTICE] = _not_restored(result, settings)
        del st.query_params[PARAM]  # the link's conversation stays in the store, untouched; this tab starts anew
    return result.keeper


def _continue_with(state: Any, result: Reopened) -> None:
    memory = result.memory
    assert memory is not None
    state[keys.MEMORY] = memory
    state[keys.BUDGET_INPUT] = memory.max_input_tokens
    state[keys.WINDOW_INPUT] = memory.max_recent_turns
    state[keys.FOLD_POLICY_INPUT] = memory.fold_policy
    if result.language in LANGUAGES:
        state[keys.LANG] = result.language
    # As after an import: coming back sends no request; the next reply's prefold does what is due.
    state[keys.PREFOLD_AT] = len(memory.history)
    state[keys.NOTICE] = Notice("info", "conversation.restored", {"id": result.keeper.conversation_id, "messages": len(memory.history)})


def _not_restored(result: Reopened, settings: Settings) -> Notice:
    requested = result.requested_id or ""
    if result.outcome == "missing" and not is_conversation_id(requested):
        return Notice("warning", "conversation.bad_id")
    if result.outcome == "missing":
        return Notice("warning", "conversation.missing", {"id": requested, "days": settings.conversation_idle_days})
    if result.outcome == "refused":
        code = getattr(result.problem, "code", "bad_value")
        return Notice("error", "conversation.refused", {"id": requested, "code": code, "path": getattr(result.problem, "path", "")})
    return Notice("error", "conversation.load_failed", {"id": requested}, error=result.problem)


def _sync_url(keeper: ConversationKeeper) -> None:
    current = st.query_params.get(PARAM)
    if keeper.saved and current != keeper.conversation_id:
        st.query_params[PARAM] = keeper.conversation_id
    elif not keeper.saved and current is not None:
        del st.query_params[PARAM]  # after Reset: the old link would open the old conversation


def render_status(keeper: ConversationKeeper | None, lang: str) -> None:
    """The caption under the title: the id, and one line on what it is (and is not); then what went wrong."""
    if keeper is None:
        render.caption(":material/cloud_off: " + t(lang, "conversation.off"))
        return
    if keeper.saved:
        render.caption(":material/bookmark: " + t(lang, "conversation.saved", id=keeper.conversation_id))
    else:
        render.caption(":material/bookmark_border: " + t(lang, "conversation.unsaved"))
    fork, failure = keeper.fork, keeper.failure  # read once: a worker thread may change them meanwhile
    if fork is not None:
        render.alert("warning", t(lang, "conversation.forked", old=fork.from_id, new=fork.to_id), icon=":material/call_split:")
    if failure is not None:
        render.alert("warning", t(lang, "conversation.save_failed", reason=error_message(lang, failure)), icon=":material/sync_problem:")
