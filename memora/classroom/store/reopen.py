"""Opens a conversation into a new keeper: one saved under an id (``reopen``), the one another
keeper of this process holds (``reopen_live``), a later version with this tab's choices carried over
(``carry_choices``), or an imported file saved as a new conversation (``save_import``).

The keeper (``keeper.ConversationKeeper``) keeps a conversation once it is open; this module decides
what it opens, for a page that loads, reloads, catches up with another tab or imports a file. Each
opens only its owner's conversations and sends no request to a model.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Literal

from memora.classroom.store.base import (
    CapReached,
    ConversationStore,
    Gone,
    IdleSweep,
    RoomRequest,
    StoreError,
    is_conversation_id,
    new_conversation_id,
)
from memora.classroom.store.keeper import ConversationKeeper, ask_until_answered
from memora.classroom.store.saved import (
    MAX_SAVED_BYTES,
    SavedConversationError,
    dumps_saved,
    parse_saved,
    restore_saved,
)
from memora.classroom.transcript.format import committed_request
from memora.memory import ShortTermMemory


def save_import(keeper: ConversationKeeper, memory: ShortTermMemory) -> CapReached | Gone | None:
    """Saves ``memory`` (an imported conversation, in no other hands yet) as a new conversation, if
    the caps let it.

    An import takes room as a turn does: it is booked in the store first
    (``ConversationStore.book``), against the room the turns running on every process hold, and
    given back once saved. Returns the cap (or Gone, for a forgotten browser) that refused it, and
    then nothing changed: ``keeper`` still keeps the conversation it had. Otherwise ``keeper`` keeps
    ``memory`` from now on; a store that failed otherwise is retried as after any failed save.
    """
    with memory.lock:
        request = committed_request(memory)
        payload = dumps_saved(memory, keeper.language, last_request=request)
    if len(payload.encode()) > MAX_SAVED_BYTES:
        return CapReached("conversation", MAX_SAVED_BYTES)
    conversation_id = new_conversation_id()
    try:
        try:
            admission = keeper.store.book(
                RoomRequest(
                    keeper.holder, keeper.owner, conversation_id, 0, 0, len(payload.encode())
                )
            )
            if admission.refusal is not None:
                return admission.refusal
            row = keeper.store.save(conversation_id, payload, 0, keeper.owner)
        finally:
            keeper.release_room()
    except (CapReached, Gone) as cap:
        return cap
    except StoreError as error:
        keeper.start_new(memory)
        keeper.failure = error
        keeper.dirty = True
        return None
    keeper.start_new(memory)
    with keeper._lock:
        keeper.conversation_id = conversation_id
        keeper.version = row.version
        keeper.saved_choices = keeper.choices(memory)
        keeper.request = request
        keeper.stored_bytes = keeper.size = len(payload.encode())
        keeper.stored_requests = len(memory.ledger)
        keeper.stored_messages = len(memory.history)
    return None


Opened = Literal["new", "restored", "missing", "refused", "failed"]


@dataclass(frozen=True)
class Reopened:
    """What ``reopen`` found: ``memory`` (restored, or None), its language, and why not when it
    could not."""

    outcome: Opened
    keeper: ConversationKeeper
    memory: ShortTermMemory | None = None
    language: str | None = None
    requested_id: str | None = None
    problem: Exception | None = None
    pending_message: str | None = None


def reopen(
    store: ConversationStore,
    requested_id: str | None,
    session: ShortTermMemory,
    *,
    owner: str,
    locked: bool,
    sweep: IdleSweep | None = None,
) -> Reopened:
    """``owner``'s conversation saved under ``requested_id``, continuing ``session``'s backend and
    caps; sends no request.

    ``new``: no id asked for. ``missing``: no such conversation of this owner (never saved, swept as
    idle, saved by another browser or before owners existed, or not an id at all: these are not told
    apart, and nothing of another owner's conversation is read). ``refused``: its payload is
    malformed (``problem`` is a SavedConversationError). ``failed``: the store could not be read
    (``problem`` is a StoreError), after asking again for up to ``STORE_RETURN_S`` while it did
    not answer (``ask_until_answered``). In every case but ``restored`` the keeper holds a new id,
    so nothing overwrites the conversation that was asked for.
    """
    fresh = ConversationKeeper(store, owner=owner, sweep=sweep)
    if requested_id is None:
        return Reopened("new", fresh)
    if not is_conversation_id(requested_id):
        return Reopened("missing", fresh, requested_id=requested_id)
    try:
        # Asked again while the store does not answer: a page that opens during a PostgreSQL
        # restart would else start a second conversation beside hers (``failed`` gives a new id).
        row = ask_until_answered(lambda: store.load(requested_id, owner))
    except StoreError as error:
        return Reopened("failed", fresh, requested_id=requested_id, problem=error)
    if row is None:
        return Reopened("missing", fresh, requested_id=requested_id)
    try:
        saved = parse_saved(row.payload)
        memory = restore_saved(saved, session, locked=locked)
    except SavedConversationError as error:
        return Reopened("refused", fresh, requested_id=requested_id, problem=error)
    keeper = ConversationKeeper(store, requested_id, row.version, owner=owner, sweep=sweep)
    keeper.language = saved.language
    keeper.stored_bytes = len(row.payload.encode())
    keeper.stored_requests = len(memory.ledger)
    keeper.stored_messages = len(memory.history)
    keeper.request = memory.last_prepared
    # The stored copy's choices: the page saves only choices changed since (a reopened conversation
    # is not written again merely for being opened, which would make another tab's next save, or a
    # stopping process's, a fork).
    keeper.saved_choices = keeper.choices(memory)
    return Reopened(
        "restored",
        keeper,
        memory,
        saved.language,
        requested_id,
        pending_message=saved.pending_message,
    )


def carry_choices(old: ConversationKeeper, memory: ShortTermMemory, newer: Reopened) -> Reopened:
    """``newer`` (a later version of ``old``'s conversation, reopened because ``room`` found this
    tab ``behind``) with the choices this tab changed since its last save re-applied: its language,
    budget, window and fold policy. A choice this tab left as it was keeps the later version's
    (another tab may have changed it); one the later version's memory refuses (its ``configure``
    raises ValueError) is left as that version has it. The keeper's stored choices stay the later
    version's, so the page's next ``save_changed_choices`` saves the carried ones under the same id.
    Under locked settings the budget, window and fold policy are the server's on both sides, so only
    the language can differ."""
    new_memory = newer.memory
    saved = old.saved_choices
    if new_memory is None or saved is None:
        return newer
    language, budget, window, policy = old.choices(memory)
    changes = {
        "max_input_tokens": budget if budget != saved[1] else None,
        "max_recent_turns": window if window != saved[2] else None,
        "fold_policy": policy if policy != saved[3] else None,
    }
    for name, value in changes.items():
        if value is not None:
            with contextlib.suppress(ValueError):
                new_memory.configure(**{name: value})
    if language == saved[0]:
        return newer
    newer.keeper.language = language
    return replace(newer, language=language)


def reopen_live(
    live: ConversationKeeper, session: ShortTermMemory, *, locked: bool, wait_s: float = 5.0
) -> Reopened | None:
    """The conversation ``live`` keeps in this process, copied into a new keeper for ``session``;
    sends no request.

    For a reload while the conversation is newer here than in the store (a reply just committed, or
    a save the store refused): the copy continues at ``live``'s version, so the next save follows it
    instead of forking, and it keeps ``live``'s unsaved state (``dirty``, ``failure``) to retry. The
    payload goes through the store's own rules (``parse_saved``, ``restore_saved``), so the copy is
    what a restore from the store would give. None when the memory stays busy for ``wait_s`` (a turn
    of another tab), or when the copy is refused (then the store's copy is the one to open). The
    copy keeps ``live.owner``: the caller opens it only for that owner's browser, as ``reopen``
    would.
    """
    memory = live.memory
    if memory is None or not memory.lock.acquire(timeout=wait_s):
        return None
    try:
        with live._lock:
            payload = dumps_saved(
                memory, live.language, last_request=committed_request(memory, live.request)
            )
            conversation_id = live.conversation_id
            version = live.version
            failure = live.failure
            refusal = live.refusal
            dirty = live.dirty
            stored_bytes = live.stored_bytes
            stored_requests = live.stored_requests
            stored_messages = live.stored_messages
    finally:
        memory.lock.release()
    try:
        saved = parse_saved(payload)
        restored = restore_saved(saved, session, locked=locked)
    except SavedConversationError:
        return None
    keeper = ConversationKeeper(
        live.store, conversation_id, version, owner=live.owner, sweep=live.sweep
    )
    keeper.language = saved.language
    keeper.failure = failure
    keeper.refusal = refusal
    keeper.dirty = dirty
    keeper.stored_bytes = stored_bytes
    keeper.size = len(payload.encode())
    keeper.stored_requests = stored_requests
    keeper.stored_messages = stored_messages
    keeper.request = restored.last_prepared
    return Reopened("restored", keeper, restored, saved.language, conversation_id)
