"""What a conversation store is: a few verbs on whole conversations, each saved under an unguessable
id and an owner.

This is *conversation persistence*: the page's short-term memory (history, summary versions, ledger,
settings) survives a reload or a restart. It is not long-term memory: nothing is carried from one
conversation into another, and nothing is recalled across ids.

Every save replaces the whole saved payload in one transaction and bumps a version number. A save
names the version it was built on, so two tabs writing one id cannot overwrite each other: the
second one gets ``VersionConflict`` and must save elsewhere (the page forks it to a new id).

Every row is bound to its owner: the hash of the secret of the browser that made it
(``memora.classroom.store.owner``). ``load`` and ``save`` name the owner, and a row of another owner
(or a row saved before owners existed, whose owner is NULL) is neither read nor written: to that
browser it is not there. Every save is checked against ``StoreCaps`` in its own transaction.

A deletion leaves a tombstone: the id of a deleted conversation, or the owner hash of a forgotten
browser, with when it happened. Every save checks them in its own transaction and raises ``Gone``
for a tombstoned id, owner, or conversation it was forked from, so a tab or a process that still
holds a deleted conversation (idle, or mid-reply) can never save it back, under its id or a new one.
Tombstones hold no text; the idle sweep removes them with the conversations, once no tab can still
hold what they name.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{32}")
"""``secrets.token_urlsafe(24)``: 24 random bytes, 32 URL-safe characters."""
SWEEP_INTERVAL_S = 3600.0
"""The idle sweep runs at most hourly per process: it is a housekeeping DELETE, not part of any
turn."""


BOOKING_LEASE_S = 3600.0
"""How long a turn's room booking holds its bytes when nobody gives it back: longer than any reply
runs, so a live turn never loses its room. A process that died mid-reply is found sooner: on
PostgreSQL by its presence lock (``presence``), on SQLite, a file of one machine, by
``holders.dead_holders``."""


class StoreError(RuntimeError):
    """The store could not be reached or could not complete a read or write; nothing was changed by
    it."""


class StoreUnreachable(StoreError):
    """The store did not answer: its connection was cut or refused, or the database is starting (a
    PostgreSQL restart, say). Nothing was changed by it, and the same question asked again once the
    database is back may succeed."""


class VersionConflict(StoreError):
    """The conversation was saved by someone else (another tab) since this copy was loaded or
    saved."""

    def __init__(self, conversation_id: str, expected: int, found: int | None) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.found = found
        super().__init__(f"conversation {conversation_id} is at version {found}, not {expected}")


Cap = Literal["conversation", "browser", "store"]


@dataclass(frozen=True)
class StoreCaps:
    """What the store keeps at most; None is no cap.

    ``conversation_bytes``: one conversation's saved payload (its history, summary versions, ledger
    and last context). ``new_per_hour``: conversations one owner may create in an hour (new ones,
    imports and forks alike; a conversation's later saves are not counted). ``store_bytes``: every
    payload together.
    """

    conversation_bytes: int | None = None
    new_per_hour: int | None = None
    store_bytes: int | None = None

    def admit(
        self,
        conversation_id: str,
        expected_version: int,
        owner: str,
        found: tuple[int, str | None, int] | None,
        *,
        size: int,
        new_this_hour: Callable[[], int],
        store_total: int,
    ) -> None:
        """The checks every store makes inside a save's transaction, on the row it found under the
        id.

        ``found`` is that row's (version, owner, size), or None. Raises VersionConflict when the row
        is at another version, or is another owner's (so an id from someone else's URL is never
        written), and CapReached at a cap. ``new_this_hour`` is asked only for a new row.
        """
        version = None if found is None else found[0]
        if (version or 0) != expected_version or (found is not None and found[1] != owner):
            raise VersionConflict(conversation_id, expected_version, version)
        self.check(
            size=size,
            old_size=0 if found is None else found[2],
            new_this_hour=new_this_hour() if found is None else None,
            store_total=store_total,
        )

    def check(
        self, *, size: int, old_size: int, new_this_hour: int | None, store_total: int
    ) -> None:
        """Raises CapReached for a save of ``size`` bytes over a row of ``old_size`` (0 for a new
        one).

        ``new_this_hour`` is the owner's conversations created in the last hour, for a new row (None
        for an update). A save that does not grow its row passes the store cap: a full store still
        lets a conversation be saved as it was, never larger.
        """
        if self.conversation_bytes is not None and size > self.conversation_bytes:
            raise CapReached("conversation", self.conversation_bytes)
        if (
            self.new_per_hour is not None
            and new_this_hour is not None
            and new_this_hour >= self.new_per_hour
        ):
            raise CapReached("browser", self.new_per_hour)
        if (
            self.store_bytes is not None
            and size > old_size
            and store_total - old_size + size > self.store_bytes
        ):
            raise CapReached("store", self.store_bytes)


class Gone(StoreError):
    """A save or a turn was refused, changing nothing, because its conversation was deleted
    (``what`` is ``conversation``) or its browser forgotten (``browser``) by another tab or process
    since it was loaded."""

    def __init__(self, what: Literal["conversation", "browser"]) -> None:
        self.what = what
        super().__init__(f"this {what} was deleted or forgotten in another tab")


class CapReached(StoreError):
    """A save was refused, changing nothing, because it would pass ``cap`` (its ``limit``, in bytes
    or conversations)."""

    def __init__(self, cap: Cap, limit: int) -> None:
        self.cap = cap
        self.limit = limit
        super().__init__(f"the store's {cap} cap ({limit:,}) is reached")


@dataclass(frozen=True)
class StoredConversation:
    """One saved conversation: its id, its version (1 after the first save), the payload and when it
    was saved."""

    conversation_id: str
    version: int
    payload: str
    updated_at: datetime


@dataclass(frozen=True)
class RoomRequest:
    """One turn asking for room before it is sent (``ConversationStore.book``).

    ``holder`` names the asker (a keeper: one booking each, a new one replaces its last);
    ``version`` is the one its copy of ``conversation_id`` was loaded or saved at (0: not saved
    yet); ``stored`` that copy's saved size and ``after`` its largest size after the turn
    (``memora.classroom.store.room``).
    """

    holder: str
    owner: str
    conversation_id: str
    version: int
    stored: int
    after: int


@dataclass(frozen=True)
class Booked:
    """Another holder's live booking, as ``admit_turn`` weighs it: its conversation, owner, bytes,
    and whether its turn saves a new conversation (a first turn, or a copy of one another tab
    saved); ``holder`` names it."""

    conversation_id: str
    owner: str
    size: int
    new: bool
    holder: str = ""


@dataclass(frozen=True)
class Admission:
    """The store's answer to a ``RoomRequest``: ``refusal`` (None: admitted, and ``size`` bytes are
    booked); ``fork`` when the turn must be saved as a new conversation, since another tab saved or
    is saving this one; ``new`` when the turn's save creates a conversation (its first turn, or that
    fork); ``behind`` when the fork is only because the stored copy is a later version of this
    browser's conversation, with no turn running on it: a tab with nothing unsaved of its own can
    open that version and go on with it instead (``ConversationKeeper.room``); ``busy`` when another
    holder is sending a turn on this browser's conversation now, whose save will come first."""

    refusal: CapReached | Gone | None
    fork: bool = False
    new: bool = False
    size: int = 0
    behind: bool = False
    busy: bool = False


class Unreleased:
    """The holders whose booking a store could not drop (it failed when their turn ended, a full
    disk say), per store object: the next booking on that store drops them first, in its own
    transaction, so a booking left that way neither holds bytes nor makes a reloaded tab's turn look
    like a second tab's until its lease ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: set[str] = set()

    def add(self, holder: str) -> None:
        with self._lock:
            self._holders.add(holder)

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._holders)

    def dropped(self, holders: list[str]) -> None:
        with self._lock:
            self._holders.difference_update(holders)


def admit_turn(
    caps: StoreCaps,
    request: RoomRequest,
    found: tuple[int, str | None, int] | None,
    others: list[Booked],
    *,
    new_this_hour: Callable[[], int],
    store_total: int,
) -> Admission:
    """The decision every store makes under its lock, on the row it found under the id and the other
    live bookings.

    The turn forks when its copy is not the stored one (another version, another owner's id, or no
    row: swept) or another holder is sending on the same conversation now: then its save is a whole
    new conversation, so the browser's hourly cap applies, with the new conversations other turns of
    the browser have booked, and the store needs room for the whole copy. Otherwise it needs room
    for its growth only. The store's bytes count every other live booking, so turns on several
    processes are never admitted on the same last bytes.
    """
    sending = any(b.conversation_id == request.conversation_id for b in others)
    # The stored row is this very copy: this owner's, at the version it was loaded or saved at.
    stored_copy = found is not None and found[0] == request.version and found[1] == request.owner
    fork = request.version > 0 and (not stored_copy or sending)
    ours = found is not None and found[1] == request.owner
    behind = fork and ours and found[0] > request.version and not sending
    busy = request.version > 0 and ours and sending
    new = request.version == 0 or fork
    size = request.after if fork else max(1, request.after - request.stored)
    if caps.conversation_bytes is not None and request.after > caps.conversation_bytes:
        return Admission(
            CapReached("conversation", caps.conversation_bytes), fork, new, behind=behind, busy=busy
        )
    if new and caps.new_per_hour is not None:
        booked_new = sum(1 for b in others if b.new and b.owner == request.owner)
        if new_this_hour() + booked_new >= caps.new_per_hour:
            return Admission(
                CapReached("browser", caps.new_per_hour), fork, new, behind=behind, busy=busy
            )
    if (
        caps.store_bytes is not None
        and store_total + sum(b.size for b in others) + size > caps.store_bytes
    ):
        return Admission(CapReached("store", caps.store_bytes), fork, new, behind=behind, busy=busy)
    return Admission(None, fork, new, size, behind, busy)


def new_conversation_id() -> str:
    """An unguessable id: whoever knows it can open the conversation, so it is as strong as a
    session token."""
    return secrets.token_urlsafe(24)


def is_conversation_id(text: str | None) -> bool:
    """Whether ``text`` has the shape of an id this module makes (a URL may carry anything)."""
    return bool(text) and ID_PATTERN.fullmatch(text or "") is not None


class ConversationStore(Protocol):
    """Whole conversations by id. Implementations are safe to share between the threads of one
    process."""

    def load(self, conversation_id: str, owner: str) -> StoredConversation | None:
        """The conversation saved under that id by ``owner``, or None when there is none: never
        saved, swept, deleted (its id or its owner has a tombstone), or saved by another owner (or
        before owners existed), which is not told apart. Raises StoreError."""
        ...

    def save(
        self,
        conversation_id: str,
        payload: str,
        expected_version: int,
        owner: str,
        *,
        forked_from: str | None = None,
    ) -> StoredConversation:
        """Replaces the payload in one transaction and returns the new row (version
        ``expected_version + 1``).

        ``expected_version`` is 0 for a conversation never saved: the new row is bound to ``owner``;
        ``forked_from`` names the conversation a new row copies (a second tab's). Raises Gone,
        changing nothing, when the id, the conversation it was forked from or the owner has a
        tombstone; VersionConflict when the stored version is another, or the row is another owner's
        (or, for 0, when the id is taken); CapReached when the payload, the owner's new
        conversations this hour or the whole store would pass the store's caps; StoreError
        otherwise.
        """
        ...

    def book(self, request: RoomRequest) -> Admission:
        """Books room for one turn before it is sent, in one transaction under the store's lock
        (``admit_turn``): refused with Gone for a tombstoned owner or conversation, with CapReached
        at a cap. An admitted booking replaces the holder's last one and holds until ``release`` or
        ``BOOKING_LEASE_S``. Raises StoreError."""
        ...

    def release(self, holder: str) -> None:
        """Drops ``holder``'s booking, if any: its turn has ended, and saved what it could. Raises
        StoreError."""
        ...

    def running(self, conversation_id: str, holder: str, owner: str | None = None) -> bool:
        """Whether a holder other than ``holder`` has a live booking on the conversation: a turn is
        running on it elsewhere (another tab, a process stopping mid-reply), whose save will come
        first. With ``owner``, only that owner's bookings count (a page asking about an id from its
        URL learns nothing of another browser's turns). Reads only, takes no lock and books nothing,
        so a tab waiting for that turn may ask often. Raises StoreError."""
        ...

    def delete(self, conversation_id: str, owner: str) -> bool:
        """Deletes ``owner``'s conversation saved under that id, and leaves its tombstone, in one
        transaction; True when there was one. The tombstone is left for an id not saved yet too (a
        reply in another tab may save it first), never for another owner's row.

        The row holds the conversation's only stored copy (every save replaced the last), so this
        removes every saved version: no ``load`` finds it again, and a later save naming its old
        version gets VersionConflict. Another owner's row (or a row of no owner) is left as it is
        and gives False, as a missing id does: they are not told apart. Raises StoreError, deleting
        nothing.
        """
        ...

    def delete_owner(self, owner: str) -> int:
        """Deletes every conversation ``owner`` saved (a browser that is forgotten), and leaves the
        owner's tombstone, in one transaction; returns how many. Another owner's rows are never
        touched. Raises StoreError, deleting nothing."""
        ...

    def delete_idle(self, idle_for: timedelta) -> int:
        """Deletes conversations not saved for longer than ``idle_for``, and tombstones older than
        that (what they name would have been swept by now), and bookings past their lease; returns
        how many conversations. Raises StoreError."""
        ...

    def close(self) -> None:
        """Releases connections; the store is not used afterwards."""
        ...


class IdleSweep:
    """Runs ``store.delete_idle(idle_for)`` when called, at most once per ``interval_s`` (per
    process).

    A failed sweep is retried at the next due call; it never fails the save that triggered it.
    """

    def __init__(
        self, store: ConversationStore, idle_for: timedelta, interval_s: float = SWEEP_INTERVAL_S
    ) -> None:
        self.store = store
        self.idle_for = idle_for
        self.interval_s = interval_s
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def maybe_run(self) -> int | None:
        """How many conversations were deleted, or None when no sweep was due (or it failed)."""
        with self._lock:
            if time.monotonic() < self._next:
                return None
            self._next = time.monotonic() + self.interval_s
        try:
            return self.store.delete_idle(self.idle_for)
        except StoreError:
            with self._lock:
                self._next = time.monotonic()
            return None
