"""Deleting this conversation, and forgetting this browser: what a shared lab computer needs.

*Delete this conversation* (it replaced *Reset conversation*, which started a new one and silently
kept the old one in the store, where its old address in the browser's history opened it for the next
person) deletes the conversation from the store, every saved version of it, and starts an empty one
on the same backend, model and limits. *Forget this browser* does that for every conversation this
browser saved on this server, and replaces its cookie with a new secret that owns nothing: for the
end of a lab session. Each asks for a confirmation first (a popover), so a misclick destroys
nothing.

What goes with them: a reply still being written is cancelled and nothing of it is committed or
saved (``FLIGHTS`` drops this process's flights of it, so a reload of the old address is handed
nothing, and the shutdown drain saves nothing back). What stays: the server's token budget
(``MEMORA_MAX_SERVER_TOKENS``) keeps counting every token already billed, since it is booked apart
from any conversation. When the store cannot delete (it is down), nothing changes and the page says
so: the conversation is still kept. Another process behind the same store may still hold a running
reply of it: see docs/classroom.md.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from memora.app.page import render
from memora.app.page import state as keys
from memora.app.page.browser import browser_secret
from memora.app.page.i18n import t
from memora.app.page.settings_panel import discard_job
from memora.app.page.state import Notice, new_memory
from memora.classroom.flights import FLIGHTS
from memora.classroom.store import StoreError
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_browser_secret, owner_of


def render_controls(lang: str) -> None:
    """The two controls, each a popover that explains what goes and holds the one button that does
    it."""
    # Keyed by the deletions made, so that the confirmation goes once it is done: a deletion draws
    # both popovers anew, closed. Opening or closing one reruns nothing. No hover help on them: the
    # popover says it all, and a tooltip left by the opening click covered its button.
    deletions = st.session_state[keys.DELETIONS]
    with st.popover(
        t(lang, "forget.delete"), icon=":material/delete:", key=f"delete_popover_{deletions}"
    ):
        render.caption(t(lang, "forget.delete_confirm_text"))
        st.button(
            t(lang, "forget.delete_confirm"),
            on_click=_delete_conversation,
            type="primary",
            icon=":material/delete_forever:",
        )
    with st.popover(
        t(lang, "forget.browser"), icon=":material/logout:", key=f"forget_popover_{deletions}"
    ):
        render.caption(t(lang, "forget.browser_confirm_text"))
        st.button(
            t(lang, "forget.browser_confirm"),
            on_click=_forget_browser,
            type="primary",
            icon=":material/delete_forever:",
        )


def _delete_conversation() -> None:
    state = st.session_state
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    if keeper is not None:
        deleted_id = keeper.conversation_id
        try:
            # lets go of the memory under the keeper's lock: no late commit can save it back
            keeper.delete()
        except StoreError as error:
            state[keys.NOTICE] = Notice("error", "forget.delete_failed", error=error)
            return
        FLIGHTS.forget_conversation(deleted_id, keeper.owner, deleted_by=keeper)
    _start_empty(state)
    state[keys.DELETIONS] += 1
    state[keys.NOTICE] = Notice("success", "forget.deleted")


def _forget_browser() -> None:
    state = st.session_state
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    secret = browser_secret(state)
    deleted = 0
    if keeper is not None:
        try:
            deleted = keeper.forget_browser()
        except StoreError as error:
            state[keys.NOTICE] = Notice("error", "forget.browser_failed", error=error)
            return
        FLIGHTS.forget_owner(keeper.owner)
        # A tab of this browser whose reply committed between the two steps above saved under a new
        # id: gone too.
        deleted += _delete_owner_again(keeper)
    state[keys.BROWSER_SECRET] = new_browser_secret()
    # the cookie script replaces the browser's cookie, which holds it
    state[keys.FORGOTTEN_SECRET] = secret
    if keeper is not None:
        state[keys.CONVERSATION] = ConversationKeeper(
            keeper.store, owner=owner_of(state[keys.BROWSER_SECRET]), sweep=keeper.sweep
        )
    _start_empty(state)
    state[keys.DELETIONS] += 1
    state[keys.NOTICE] = Notice("success", "forget.browser_forgotten", {"count": deleted})


def _delete_owner_again(keeper: ConversationKeeper) -> int:
    try:
        return keeper.store.delete_owner(keeper.owner)
    except StoreError:
        # the first deletion took everything that was there; a fork saved meanwhile waits for the
        # idle sweep
        return 0


def _start_empty(state: Any) -> None:
    """A new, empty memory on the same backend, model and limits; a reply in progress is cancelled,
    never committed."""
    discard_job()
    # a reply adopted from before a reload belonged to the deleted conversation
    state[keys.ADOPTED] = None
    old = state[keys.MEMORY]
    settings = state[keys.SETTINGS].with_changes(
        model=old.model,
        max_input_tokens=old.max_input_tokens,
        max_recent_turns=old.max_recent_turns,
        fold_policy=old.limits.fold_policy,
    )
    state[keys.MEMORY] = new_memory(settings, backend=old.server.backend)
    for key in (keys.PENDING_TEXT, keys.RESTORE_TEXT, keys.COMMAND, keys.SETTINGS_NOTICE):
        state[key] = None
    state[keys.DEFERRED_SETTINGS] = frozenset()
