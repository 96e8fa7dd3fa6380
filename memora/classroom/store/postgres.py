"""The shared store: PostgreSQL through psycopg 3, so several Streamlit processes or machines serve
one class.

Every store of one process on one database borrows from the process's one pool (``postgres_pool``),
opened on first use and made again after a connection breaks, so a database restart costs no failed
save and no browser's message adds a connection. The version check is in the UPDATE's WHERE clause:
two processes saving the same version cannot both win.

A deleted conversation is gone for every query at once. PostgreSQL's own files keep the dead row's
bytes until VACUUM (autovacuum) reuses the space, and its write-ahead log and backups as the
operator keeps them: the database's operator can still reach them for that time, no page or student
can.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from memora.classroom.store.base import (
    BOOKING_LEASE_S,
    Admission,
    Booked,
    Gone,
    RoomRequest,
    StoreCaps,
    StoredConversation,
    Unreleased,
    VersionConflict,
    admit_turn,
)
from memora.classroom.store.postgres_pool import PostgresTables
from memora.classroom.store.presence import RESTART_SETTLE_S, holder_alive, shared_presence

T = TypeVar("T")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS memora_conversations (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS memora_conversations_updated_at ON memora_conversations (updated_at);
ALTER TABLE memora_conversations ADD COLUMN IF NOT EXISTS owner TEXT;
ALTER TABLE memora_conversations ADD COLUMN IF NOT EXISTS created_at TIMESTAMPTZ;
ALTER TABLE memora_conversations ADD COLUMN IF NOT EXISTS size INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS memora_conversations_owner_created
    ON memora_conversations (owner, created_at);
UPDATE memora_conversations SET size = octet_length(payload) WHERE size = 0;
CREATE TABLE IF NOT EXISTS memora_tombstones (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);
CREATE TABLE IF NOT EXISTS memora_room_bookings (
    holder TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    size BIGINT NOT NULL,
    new BOOLEAN NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
ALTER TABLE memora_room_bookings ADD COLUMN IF NOT EXISTS presence INTEGER
"""
"""The ALTERs migrate a table made before owners and caps in place: its rows keep a NULL owner, so
no browser opens them (the idle sweep removes them), and get their sizes, so they count against the
cap. The tombstones and the turns' room bookings (``base``) are tables of their own, made when
missing; a booking's ``presence`` is the key of its process's presence lock (``presence``), NULL in
a booking an older Memora made."""
CAPS_LOCK = 734_522_002
"""An advisory lock taken by every room booking, and by a save when the store has a per-browser or
whole-store cap: two processes checking those caps (or booking turns of one conversation) at once
would otherwise both pass them."""
CONVERSATION_LOCK = 734_522_004
"""With a conversation id's hash, the advisory lock every save of it and its deletion take (a copy's
save takes its original's too): a deletion committing between a first save's tombstone check and its
INSERT would otherwise be lost, since there is no row yet whose lock the save could wait for."""
OWNER_LOCK = 734_522_005
"""With an owner hash's hash, the advisory lock every save for that owner and the forgetting of the
owner take: the same race, for a browser forgotten while one of its conversations is first saved."""


class PostgresStore:
    """``ConversationStore`` on a PostgreSQL database
    (``postgresql://user:password@host:port/db``)."""

    def __init__(
        self, url: str, caps: StoreCaps | None = None, *, settle_s: float = RESTART_SETTLE_S
    ) -> None:
        """``settle_s``: how long after a database restart a booking without its holder's lock still
        counts (``presence.RESTART_SETTLE_S``)."""
        self.db = PostgresTables(url, _SCHEMA)
        self.caps = caps or StoreCaps()
        self.settle_s = settle_s
        self._unreleased = Unreleased()

    def _run(self, work: Callable[[Any], T]) -> T:
        """``work`` in one transaction; the first that succeeds also starts taking this process's
        presence lock, which a turn's booking records, so that the lock is held by the time a turn
        is booked (and a URL that never worked, a wrong password say, starts no thread that would
        try it again and again)."""
        result = self.db.run(work)
        shared_presence(self.db.url).start()
        return result

    def load(self, conversation_id: str, owner: str) -> StoredConversation | None:
        # A tombstoned id or owner is not there, even with a row left by a save that lost the race
        # to its deletion before both took the conversation's lock.
        query = (
            "SELECT id, version, payload, updated_at FROM memora_conversations "
            "WHERE id = %s AND owner = %s AND NOT EXISTS (SELECT 1 FROM memora_tombstones "
            "WHERE (kind = 'conversation' AND key = %s) OR (kind = 'owner' AND key = %s))"
        )
        row = self._run(
            lambda c: c.execute(query, (conversation_id, owner, conversation_id, owner)).fetchone()
        )
        return None if row is None else StoredConversation(*row)

    def save(
        self,
        conversation_id: str,
        payload: str,
        expected_version: int,
        owner: str,
        *,
        forked_from: str | None = None,
    ) -> StoredConversation:
        size = len(payload.encode())

        def write(c: Any) -> StoredConversation:
            if self.caps.new_per_hour is not None or self.caps.store_bytes is not None:
                c.execute("SELECT pg_advisory_xact_lock(%s)", (CAPS_LOCK,))
            # A deletion holds these locks until its tombstone commits: the check below sees it, so
            # neither a first save nor a copy outlives the deletion of its conversation or its
            # browser.
            c.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (OWNER_LOCK, owner))
            for key in sorted({conversation_id, forked_from} - {None}):
                c.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (CONVERSATION_LOCK, key)
                )
            gone = _tombstone(c, owner, conversation_id, forked_from)
            if gone is not None:
                raise gone
            row = c.execute(
                "SELECT version, owner, size FROM memora_conversations WHERE id = %s FOR UPDATE",
                (conversation_id,),
            ).fetchone()
            self.caps.admit(
                conversation_id,
                expected_version,
                owner,
                row,
                size=size,
                new_this_hour=lambda: self._new_this_hour(c, owner),
                store_total=self._total(c),
            )
            if row is None:
                written = c.execute(
                    "INSERT INTO memora_conversations "
                    "(id, version, payload, owner, created_at, size) "
                    "VALUES (%s, 1, %s, %s, now(), %s) "
                    "ON CONFLICT (id) DO NOTHING RETURNING updated_at",
                    (conversation_id, payload, owner, size),
                ).fetchone()
            else:
                written = c.execute(
                    "UPDATE memora_conversations "
                    "SET version = version + 1, payload = %s, size = %s, updated_at = now() "
                    "WHERE id = %s AND version = %s RETURNING updated_at",
                    (payload, size, conversation_id, expected_version),
                ).fetchone()
            if (
                written is None
            ):  # another process inserted this id between the SELECT and the INSERT
                raise VersionConflict(conversation_id, expected_version, None)
            return StoredConversation(conversation_id, expected_version + 1, payload, written[0])

        return self._run(write)

    def book(self, request: RoomRequest) -> Admission:
        unreleased = self._unreleased.pending()
        presence = shared_presence(self.db.url).key()

        def book(c: Any) -> Admission:
            c.execute(
                "SELECT pg_advisory_xact_lock(%s)", (CAPS_LOCK,)
            )  # every process books one turn at a time
            if unreleased:
                c.execute("DELETE FROM memora_room_bookings WHERE holder = ANY(%s)", (unreleased,))
            gone = _tombstone(
                c, request.owner, request.conversation_id if request.version else None, None
            )
            if gone is not None:
                return Admission(gone)
            query = "SELECT version, owner, size FROM memora_conversations WHERE id = %s"
            found = c.execute(query, (request.conversation_id,)).fetchone()
            # A booking whose process is gone (exited, killed, its machine lost) holds no room and
            # runs no turn.
            c.execute(
                f"DELETE FROM memora_room_bookings b WHERE NOT {holder_alive('b')}",
                (self.settle_s,),
            )
            others = [
                Booked(*row)
                for row in c.execute(
                    "SELECT conversation_id, owner, size, new, holder FROM memora_room_bookings "
                    "WHERE holder != %s AND expires_at > now()",
                    (request.holder,),
                )
            ]
            admission = admit_turn(
                self.caps,
                request,
                found,
                others,
                new_this_hour=lambda: self._new_this_hour(c, request.owner),
                store_total=self._total(c),
            )
            if admission.refusal is None:
                lease = timedelta(seconds=BOOKING_LEASE_S)
                c.execute(
                    "INSERT INTO memora_room_bookings "
                    "(holder, owner, conversation_id, size, new, expires_at, presence) "
                    "VALUES (%s, %s, %s, %s, %s, now() + %s, %s) "
                    "ON CONFLICT (holder) DO UPDATE SET owner = excluded.owner, "
                    "conversation_id = excluded.conversation_id, size = excluded.size, "
                    "new = excluded.new, expires_at = excluded.expires_at, "
                    "presence = excluded.presence",
                    (
                        request.holder,
                        request.owner,
                        request.conversation_id,
                        admission.size,
                        admission.new,
                        lease,
                        presence,
                    ),
                )
            return admission

        admission = self._run(book)
        self._unreleased.dropped(unreleased)
        return admission

    def release(self, holder: str) -> None:
        self._unreleased.add(
            holder
        )  # until the deletion is written: then the next booking drops it
        self._run(
            lambda c: c.execute("DELETE FROM memora_room_bookings WHERE holder = %s", (holder,))
        )
        self._unreleased.dropped([holder])

    def running(self, conversation_id: str, holder: str, owner: str | None = None) -> bool:
        query = (
            "SELECT EXISTS (SELECT 1 FROM memora_room_bookings b "
            "WHERE conversation_id = %s AND holder != %s AND (%s::text IS NULL OR owner = %s) "
            f"AND expires_at > now() AND {holder_alive('b')})"
        )
        parameters = (conversation_id, holder, owner, owner, self.settle_s)
        return bool(self._run(lambda c: c.execute(query, parameters).fetchone()[0]))

    def delete(self, conversation_id: str, owner: str) -> bool:
        def delete(c: Any) -> bool:
            c.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (CONVERSATION_LOCK, conversation_id),
            )  # see its docstring
            deleted = c.execute(
                "DELETE FROM memora_conversations WHERE id = %s AND owner = %s",
                (conversation_id, owner),
            ).rowcount
            if (
                c.execute(
                    "SELECT 1 FROM memora_conversations WHERE id = %s", (conversation_id,)
                ).fetchone()
                is None
            ):
                _bury(
                    c, "conversation", conversation_id
                )  # never for another owner's row: nobody may bury what is not theirs
            return bool(deleted)

        return bool(self._run(delete))

    def delete_owner(self, owner: str) -> int:
        def delete(c: Any) -> int:
            c.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (OWNER_LOCK, owner)
            )  # see its docstring
            deleted = int(
                c.execute("DELETE FROM memora_conversations WHERE owner = %s", (owner,)).rowcount
            )
            _bury(c, "owner", owner)
            return deleted

        return int(self._run(delete))

    def delete_idle(self, idle_for: timedelta) -> int:
        def sweep(c: Any) -> int:
            c.execute("DELETE FROM memora_tombstones WHERE deleted_at < now() - %s", (idle_for,))
            c.execute("DELETE FROM memora_room_bookings WHERE expires_at < now()")
            return int(
                c.execute(
                    "DELETE FROM memora_conversations WHERE updated_at < now() - %s", (idle_for,)
                ).rowcount
            )

        return self._run(sweep)

    def close(self) -> None:
        self.db.close()

    def _new_this_hour(self, c: Any, owner: str) -> int:
        if self.caps.new_per_hour is None:
            return 0
        query = (
            "SELECT COUNT(*) FROM memora_conversations "
            "WHERE owner = %s AND created_at > now() - interval '1 hour'"
        )
        return int(c.execute(query, (owner,)).fetchone()[0])

    def _total(self, c: Any) -> int:
        if self.caps.store_bytes is None:
            return 0
        return int(
            c.execute("SELECT COALESCE(SUM(size), 0) FROM memora_conversations").fetchone()[0]
        )


def _bury(c: Any, kind: str, key: str) -> None:
    c.execute(
        "INSERT INTO memora_tombstones (kind, key) VALUES (%s, %s) "
        "ON CONFLICT (kind, key) DO UPDATE SET deleted_at = now()",
        (kind, key),
    )


def _tombstone(
    c: Any, owner: str, conversation_id: str | None, forked_from: str | None
) -> Gone | None:
    """Gone when ``owner`` was forgotten, or ``conversation_id`` or ``forked_from`` (None: not
    asked) deleted."""
    if c.execute(
        "SELECT 1 FROM memora_tombstones WHERE kind = 'owner' AND key = %s", (owner,)
    ).fetchone():
        return Gone("browser")
    keys = [key for key in (conversation_id, forked_from) if key is not None]
    if (
        keys
        and c.execute(
            "SELECT 1 FROM memora_tombstones WHERE kind = 'conversation' AND key = ANY(%s)", (keys,)
        ).fetchone()
    ):
        return Gone("conversation")
    return None
