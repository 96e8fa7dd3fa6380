"""Keeps one page's conversation in a store: saves it after every change, forks on a conflict.

``ConversationKeeper`` is plain Python (no Streamlit): its ``save`` is the memory's ``on_change``
hook and may run in any thread that commits a turn or a fold. It never raises: a failed save is kept
as ``failure`` and retried by the next ``save`` or ``retry``; the page reads ``failure`` and
``fork`` and says so. Nothing in memory is ever dropped because the store failed.

Every keeper saves for one owner (``memora.classroom.store.owner``: the hash of its browser's
secret), and ``reopen.reopen`` opens only that owner's conversations. Before a turn is sent,
``room`` asks the store whether it can keep the turn at its largest
(``memora.classroom.store.room``) and books that growth in the store itself until the turn has ended
(``ConversationStore.book``), so no reply is billed for a conversation that cannot be saved,
whichever process its classmates' turns run on. When the store says the turn must be saved as a copy
(another tab saved this conversation, or is sending on it now), the turn is weighed as a new
conversation before it is sent, and its first save makes that copy. A save the store's caps refuse
anyway is kept as ``refusal``: not retried on every run (it would be refused again), but by the next
turn, which ``room`` checks first. A save or a turn refused because the conversation was deleted, or
the browser forgotten, in another tab is kept as ``gone``: nothing of it is saved again, under any
id.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from memora.classroom.store.base import (
    CapReached,
    ConversationStore,
    Gone,
    IdleSweep,
    RoomRequest,
    StoredConversation,
    StoreError,
    StoreUnreachable,
    VersionConflict,
    new_conversation_id,
)
from memora.classroom.store.holders import new_holder
from memora.classroom.store.owner import new_owner
from memora.classroom.store.room import turn_growth
from memora.classroom.store.saved import (
    MAX_SAVED_BYTES,
    SavedConversationError,
    dumps_saved,
    with_pending,
)
from memora.classroom.transcript.format import committed_request
from memora.memory import ShortTermMemory
from memora.memory.hook import Change
from memora.memory.values import PreparedContext

BUSY_POLL_S = 0.2
"""How often a tab with no unsaved work asks the store again whether a turn running on its
conversation elsewhere has ended. It waits for no fixed time: as long as that turn's holder lives
(``ConversationStore.book``: on PostgreSQL by its presence lock, on SQLite by its pid), at most the
booking's lease."""

STORE_RETURN_S = 10.0
"""How long ``room`` asks again a store that did not answer (``StoreUnreachable``: a PostgreSQL
restart takes a few seconds; 2.3 s in docs/classroom.md's runs) before it sends the turn unbooked,
as for a store that is down."""

T = TypeVar("T")


@dataclass(frozen=True)
class Fork:
    """Another tab saved ``from_id`` first; this tab's conversation went on under ``to_id``. Both
    are kept whole."""

    from_id: str
    to_id: str


class ConversationKeeper:
    """The conversation of one page session: its id, the version it last saved, and what went wrong.

    ``version`` 0 means not saved yet: the id is not in the store (nor in the URL) until the first
    save. ``owner`` is the hash of the browser's secret; a keeper made without one belongs to a
    browser of its own. ``stored_bytes`` is the size of the stored copy (0 when none), ``size`` that
    of the last payload built (saved or not; None when none was built for this memory yet);
    ``stored_requests`` how many ledger records the stored copy holds, ``stored_messages`` how many
    messages of its history. ``holder`` names its room booking in the store; ``would_fork``: the
    last turn ``room`` weighed was to be saved as a copy; ``behind``: ``room`` found a later version
    of this conversation in the store while this tab has no unsaved work, so the tab should open
    that version rather than fork; ``request``: the last finished turn's (``committed_request``).
    """

    def __init__(
        self,
        store: ConversationStore,
        conversation_id: str | None = None,
        version: int = 0,
        *,
        owner: str | None = None,
        sweep: IdleSweep | None = None,
    ) -> None:
        self.store = store
        self.sweep = sweep
        self.owner = owner or new_owner()
        self.language = "en"
        self.memory: ShortTermMemory | None = None
        self.holder = new_holder()
        self._new_id()  # also sets failure, refusal, fork, dirty, saved_choices and the sizes
        if conversation_id is not None:
            self.conversation_id = conversation_id
            self.version = version
        self._lock = threading.Lock()

    @property
    def saved(self) -> bool:
        return self.version > 0

    def attach(self, memory: ShortTermMemory) -> None:
        """Saves ``memory`` after each of its committed turns and folds, from now on."""
        self.memory = memory
        memory.configure(on_change=self.on_change)

    def on_change(self, memory: ShortTermMemory, change: Change) -> None:
        # A memory left behind by a deletion or an import may still finish a turn in another thread:
        # it is no longer this id's.
        if memory is self.memory:
            self.save(memory)

    def save(self, memory: ShortTermMemory, *, wait: bool = True, fork: bool = True) -> bool:
        """Saves the whole conversation in one transaction; True when it is stored.

        The payload is read under the memory's lock, so a turn committing in another thread is never
        half-saved; with ``wait=False`` a memory busy with a turn is left alone (False), since that
        turn's own commit saves it. On a version conflict (another tab of this browser saved this id
        since) it is saved under a new id instead, and ``fork`` names both; with ``fork=False`` (a
        save of the page's choices only, which is no reason to copy a whole conversation) it is left
        unsaved and the next turn forks. On a cap, nothing is written and ``refusal`` says which. On
        another StoreError the conversation stays in memory, ``failure`` says why, and ``dirty``
        asks for a retry.
        """
        if not memory.lock.acquire(blocking=wait):
            return False
        try:
            return self._save(memory, fork)
        finally:
            memory.lock.release()

    def save_pending(self, text: str, *, timeout_s: float) -> bool:
        """Saves the conversation with ``text`` kept as its pending message (a turn the server
        stopped before it was answered), for the next visit to put back in the input box; True when
        it is stored.

        Waits up to ``timeout_s`` for the memory's lock. A turn still holding it (waiting for the
        model's first byte) has not changed what was last saved, so then the stored copy gets the
        message instead, at this keeper's version; nothing is saved (False) when there is no stored
        copy yet, when the memory holds changes the store refused (the stored copy is older), or
        when the store fails.
        """
        memory = self.memory
        if memory is None:
            return False
        if not memory.lock.acquire(timeout=timeout_s):
            return self._mark_stored_pending(text)
        try:
            return self._save(memory, pending_message=text)
        finally:
            memory.lock.release()

    def _mark_stored_pending(self, text: str) -> bool:
        with self._lock:
            if not self.saved or self.dirty:
                return False
            try:
                row = self.store.load(self.conversation_id, self.owner)
                if row is None or row.version != self.version:
                    return False
                stored = self.store.save(
                    self.conversation_id, with_pending(row.payload, text), self.version, self.owner
                )
            except (StoreError, SavedConversationError):
                return False
            self.version = stored.version
            self.stored_bytes = len(stored.payload.encode())
            return True

    def _save(
        self, memory: ShortTermMemory, fork: bool = True, pending_message: str | None = None
    ) -> bool:
        with self._lock:
            if self.gone is not None:
                return False  # deleted or forgotten elsewhere: nothing of it is ever saved again
            self.request = committed_request(memory, self.request)
            payload = dumps_saved(
                memory, self.language, pending_message=pending_message, last_request=self.request
            )
            self.size = len(payload.encode())
            if self.size > MAX_SAVED_BYTES:
                # Stored, it could never be restored (parse_saved refuses it): keep the last version
                # that can.
                self.failure = StoreError(
                    f"the conversation is over the {MAX_SAVED_BYTES:,} bytes a store keeps"
                )
                self.dirty = False
                return False
            try:
                row = self._write(memory, payload, fork)
                if row is None:
                    # No unsaved work, and a later version stored: nothing to retry, the next
                    # turn opens that version.
                    self.failure = None
                    self.dirty = False
                    return False
            except Gone as gone:
                self.gone = gone
                self.failure = None
                self.refusal = None
                self.dirty = False
                return False
            except CapReached as cap:
                self.refusal = cap
                self.failure = None
                self.dirty = False
                return False
            except StoreError as error:
                self.failure = error
                self.dirty = True
                return False
            self.version = row.version
            self.failure = None
            self.refusal = None
            self.dirty = False
            self.saved_choices = self.choices(memory)
            self.stored_bytes = self.size
            self.stored_requests = len(memory.ledger)
            self.stored_messages = len(memory.history)
            self.unsaved_choices = None
        if self.sweep is not None:
            self.sweep.maybe_run()
        return True

    def _write(
        self, memory: ShortTermMemory, payload: str, fork: bool
    ) -> StoredConversation | None:
        """Saves ``payload`` under this id, or as a copy when ``room`` said so or on a version
        conflict; None when a save that holds no unsaved work (the choices alone, ``fork`` False; a
        fold) conflicts: the next turn opens the newer version and re-applies them (``room``,
        ``reopen.carry_choices``). Raises Gone, CapReached and StoreError as the store does."""
        if not (fork and self._fork_next):
            try:
                return self.store.save(self.conversation_id, payload, self.version, self.owner)
            except VersionConflict:
                if not fork or not self._unsaved_work(memory, locked=False):
                    self.unsaved_choices = self.choices(memory)  # not tried again on every run
                    return None
        forked = new_conversation_id()
        row = self.store.save(forked, payload, 0, self.owner, forked_from=self.conversation_id)
        self.fork = Fork(self.conversation_id, forked)
        self.conversation_id = forked
        self._fork_next = False
        return row

    def unsaved_tokens(self) -> int:
        """The tokens of the model requests this conversation holds that the store does not have yet
        (0 when it is saved): what a storage failure would cost if this process lost the memory.
        Never touches the store."""
        if not self.dirty or self.memory is None:
            return 0
        return sum(record.total_tokens for record in self.memory.ledger[self.stored_requests :])

    def choices(self, memory: ShortTermMemory) -> tuple[object, ...]:
        """What the page may change between turns and the payload keeps: language, budget, window,
        fold policy."""
        return (
            self.language,
            memory.max_input_tokens,
            memory.max_recent_turns,
            memory.limits.fold_policy,
        )

    def save_changed_choices(self) -> bool:
        """Saves when a saved conversation's choices changed since its last save (no turn would save
        them before a reload); never waits for a running turn. True when nothing is left unsaved."""
        if (
            self.memory is None
            or not self.saved
            or self.choices(self.memory) in (self.saved_choices, self.unsaved_choices)
        ):
            return True
        return self.save(self.memory, wait=False, fork=False)

    def retry(self) -> bool:
        """Saves again after a failure (the page calls it on its next run); True when nothing is
        left unsaved.

        Never waits for a turn running in another thread: that turn's commit saves anyway. Once
        saved, the booking that the failed save's turn kept (``handover.turn_ended``) is given back:
        no save of it is to come now."""
        if not self.dirty or self.memory is None:
            return not self.dirty
        saved = self.save(self.memory, wait=False)
        if saved:
            self.release_room()
        return saved

    def room(
        self, message: str, *, catch_up: bool = True, on_wait: Callable[[], None] | None = None
    ) -> CapReached | Gone | None:
        """The cap a turn for ``message`` would reach at its largest
        (``memora.classroom.store.room``), asked before it is sent, so that no reply is billed for a
        turn that cannot be kept: in a new conversation, a saved one, or the copy a second tab's
        turn makes (``would_fork``: weighed as a new, whole conversation); Gone when the
        conversation was deleted, or the browser forgotten, in another tab. None when there is room:
        the turn is then booked in the store until ``release_room``, so no turn on any process takes
        the same bytes; None too when the store cannot say (it is down): the save after the turn
        reports that, and keeps the turn in memory meanwhile. A store that does not answer
        (``StoreUnreachable``: a PostgreSQL restart) is asked again for up to ``STORE_RETURN_S``
        first (``ask_until_answered``), so that a restart does not pass for "down" and let the turn
        skip a wait it owes.

        With ``catch_up``, a turn that would fork only because another tab or process saved a later
        version since this tab opened or saved it (no turn running on it now), while this tab holds
        no unsaved work of its own (a committed reply or a user message the store lacks; a changed
        choice or a fold is not, ``reopen.carry_choices`` re-applies them), books nothing and sets
        ``behind`` (returning None): the page opens that version and sends the turn on it, and the
        conversation stays one. A stopping process that saved its student's last reply after her
        page reopened the conversation elsewhere is the usual case. When a turn is running on the
        conversation elsewhere now (a process stopping mid-reply, another tab's reply), such a tab
        first waits for it for as long as its holder lives by the store's account (no fixed time;
        ``on_wait`` is called once when the wait begins, for the page to say that her last reply is
        being finished), then goes on after its save.
        """
        memory = self.memory
        self.would_fork = False
        self.behind = False
        if memory is None:
            return None
        if self.gone is not None:
            return self.gone
        refusal = self.refusal
        if refusal is not None and refusal.cap == "conversation":
            return refusal  # a conversation only grows: its next save would be refused too
        if self.size is None:
            self.size = len(
                dumps_saved(
                    memory, self.language, last_request=committed_request(memory, self.request)
                ).encode()
            )
        after = self.size + turn_growth(memory, message)
        if after > MAX_SAVED_BYTES:
            return CapReached(
                "conversation", MAX_SAVED_BYTES
            )  # stored, it could never be restored (parse_saved)
        request = RoomRequest(
            self.holder, self.owner, self.conversation_id, self.version, self.stored_bytes, after
        )
        try:
            admission = ask_until_answered(lambda: self.store.book(request))
            waiting = False
            while catch_up and admission.busy and not self._unsaved_work(memory):
                if admission.refusal is None:
                    self.release_room()
                if not waiting and on_wait is not None:
                    on_wait()
                waiting = True
                # Reads only: no booking, no lock.
                while ask_until_answered(
                    lambda: self.store.running(self.conversation_id, self.holder)
                ):
                    time.sleep(BUSY_POLL_S)
                # Once it has ended; busy again if another turn began meanwhile.
                admission = ask_until_answered(lambda: self.store.book(request))
        except StoreError:
            return None
        if catch_up and admission.behind and not self._unsaved_work(memory):
            if admission.refusal is None:
                self.release_room()
            self.behind = True
            return None
        self.would_fork = admission.fork
        self._fork_next = admission.refusal is None and admission.fork
        if isinstance(admission.refusal, Gone):
            self.gone = admission.refusal
        return admission.refusal

    def turn_running_elsewhere(self) -> bool:
        """Whether a turn runs on this conversation elsewhere now (another tab's reply, a process
        stopping mid-reply, alive by the store's account), whose save will come first: the page may
        say that her last reply is being finished, and look again. A conversation this keeper has
        not saved yet is asked about too: a page that came back during its first reply keeps its id
        while the stopping process saves it. A store that does not answer (a PostgreSQL restart) is
        asked again for up to ``STORE_RETURN_S`` (``ask_until_answered``): taken for "no turn", it
        let her next message start the conversation beside the stopping process's first reply,
        whose save then forked it. False when the store still cannot say; never raises."""
        try:
            return ask_until_answered(
                lambda: self.store.running(self.conversation_id, self.holder, self.owner)
            )
        except StoreError:
            return False

    def _unsaved_work(self, memory: ShortTermMemory, *, locked: bool = True) -> bool:
        """Whether ``memory`` holds a committed reply or a user message that the stored copy at
        ``version`` lacks: only then would opening a later version lose something. Changed choices
        and folds are not unsaved work: the choices are re-applied to the later version
        (``reopen.carry_choices``), and its next turn folds what is due. ``locked``: take the
        keeper's lock (a save, which holds it, asks without)."""
        with self._lock if locked else contextlib.nullcontext():
            return len(memory.history) != self.stored_messages

    def release_room(self) -> None:
        """Gives back the room ``room`` booked (the turn has ended). Never raises: one the store
        cannot drop lapses after its lease (``BOOKING_LEASE_S``)."""
        with contextlib.suppress(StoreError):
            self.store.release(self.holder)

    def delete(self) -> None:
        """Deletes this conversation from the store, every saved version of it, and lets go of its
        memory.

        Afterwards the keeper holds a new id, not saved yet, and no memory (``attach`` the next
        one): a turn of the old memory still committing in another thread (a reply being written)
        saves nothing, so it cannot bring the conversation back. An id this keeper never saved is
        deleted all the same, since another keeper of this browser may have saved it (a reload's).
        Raises StoreError when the store cannot delete it: then nothing changed, and the
        conversation is still kept and saved as before.
        """
        with self._lock:
            self.store.delete(self.conversation_id, self.owner)
            self._let_go()

    def forget_browser(self) -> int:
        """Deletes every conversation of this keeper's owner (its browser is forgotten) and lets go
        of its memory, as ``delete`` does; returns how many were deleted. Raises StoreError,
        changing nothing."""
        with self._lock:
            deleted = self.store.delete_owner(self.owner)
            self._let_go()
        return deleted

    def let_go(self) -> None:
        """Stops keeping this conversation without deleting it (its browser's conversations are
        deleted elsewhere, all at once): a late commit of the memory saves nothing; a new id, no
        memory."""
        with self._lock:
            self._let_go()

    def _let_go(self) -> None:
        self.memory = None  # ``on_change`` saves only the memory it keeps
        self._new_id()

    def _new_id(self) -> None:
        """A new id, not saved yet, with nothing stored, refused, failed or gone."""
        self.conversation_id = new_conversation_id()
        self.version = 0
        self.saved_choices = None
        self.unsaved_choices: tuple[object, ...] | None = (
            None  # choices another tab's save kept out of the store
        )
        self.failure = None
        self.refusal = None
        self.fork = None
        self.dirty = False
        self.gone: Gone | None = None
        self.would_fork = self._fork_next = self.behind = False
        self.request: PreparedContext | None = None
        self.stored_bytes = 0
        self.size = None
        self.stored_requests = 0
        self.stored_messages = 0

    def start_new(self, memory: ShortTermMemory) -> None:
        """A new conversation (an import): a new id, not yet saved; the old one stays in the
        store."""
        with self._lock:
            self._new_id()
        self.attach(memory)


def ask_until_answered(question: Callable[[], T]) -> T:
    """``question()`` (a read or a booking of ``room``, the load of ``reopen``), asked again every
    ``BUSY_POLL_S`` while the store does not answer, up to ``STORE_RETURN_S``.

    Why: a turn sent unbooked while PostgreSQL restarts is not told of the turn a stopping process
    is finishing on its conversation, whose save then lands first and makes this turn's save a copy
    (a fork). Edge cases: any other StoreError is raised at once (a full disk is not waited on);
    past ``STORE_RETURN_S`` the last StoreUnreachable is raised, and ``room`` goes on as for a store
    that is down."""
    deadline = time.monotonic() + STORE_RETURN_S
    while True:
        try:
            return question()
        except StoreUnreachable:
            if time.monotonic() >= deadline:
                raise
            time.sleep(BUSY_POLL_S)
