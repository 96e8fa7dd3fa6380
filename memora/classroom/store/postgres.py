"""The shared store: PostgreSQL through psycopg 3, so several Streamlit processes or machines serve one class.

One connection per store object behind one lock, opened on first use and opened again after it breaks,
so a database restart costs one failed save (which the page retries) rather than a dead page. The
version check is in the UPDATE's WHERE clause: two processes saving the same version cannot both win.

A deleted conversation is gone for every query at once. PostgreSQL's own files keep the dead row's bytes
until VACUUM (autovacuum) reuses the space, and its write-ahead log and backups as the operator keeps
them: the database's operator can still reach them for that time, no page or student can.
"""

from __future__ import annotations

import functools
import logging
import threading
from datetime import timedelta
from typing import Any

from memora.classroom.store.base import (
    BOOKING_LEASE_S,
    Admission,
    Booked,
    Gone,
    RoomRequest,
    StoreCaps,
    StoredConversation,
    StoreError,
    Unreleased,
    VersionConflict,
    admit_turn,
    dead_holders,
)

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 5
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
CREATE INDEX IF NOT EXISTS memora_conversations_owner_created ON memora_conversations (owner, created_at);
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
)
"""
"""The ALTERs migrate a table made before owners and caps in place: its rows keep a NULL owner, so no
browser opens them (the idle sweep removes them), and get their sizes, so they count against the cap. The tombstones
and the turns' room bookings (``base``) are tables of their own, made when missing."""
CAPS_LOCK = 734_522_002
"""An advisory lock taken by every room booking, and by a save when the store has a per-browser or whole-store cap:
two processes checking those caps (or booking turns of one conversation) at once would otherwise both pass them."""
SCHEMA_LOCK = 734_522_001
"""An advisory lock id: two processes creating the tables at once would otherwise race in PostgreSQL's catalog."""


class PostgresConnection:
    """One lazily opened connection, its lock, and the tables it needs; shared by the store and the server ledger.

    A connection opened before a database restart is found broken only when it is next used: ``run``
    then opens a new one and tries once more, so the first page after the restart works. Every error
    becomes a StoreError whose text has the URL's credentials redacted in any form.
    """

    def __init__(self, url: str, schema: str) -> None:
        self.url, self.schema = url, schema
        self.lock = threading.Lock()
        self._connection: Any = None

    def __repr__(self) -> str:  # the URL may hold a password
        return f"PostgresConnection({self.place!r})"

    @functools.cached_property
    def place(self) -> str:
        """Host, port and database: names the database in logs and keys, never its credentials."""
        from memora.backends.redaction import redact, url_secrets

        netloc = self.url.partition("://")[2].rpartition("@")[2].partition("/")[0]
        database = self.url.rpartition("/")[2].partition("?")[0]
        return redact(f"postgresql://{netloc}/{database}", url_secrets(self.url))

    def run(self, work: Any) -> Any:
        """``work(connection)`` inside one transaction, under the lock; psycopg's errors become StoreError.

        A connection that was open before and is found broken (a database restart, an idle drop) is
        replaced and ``work`` runs once more: its transaction never committed, so nothing runs twice.
        """
        import psycopg

        with self.lock:
            for attempt in (1, 2):
                reused = self._connection is not None and not self._connection.closed
                try:
                    connection = self._connect()
                    with connection.transaction():
                        return work(connection)
                except psycopg.Error as error:
                    broken = reused and self._connection is not None and self._connection.broken
                    self._drop()
                    if attempt == 1 and broken:
                        continue
                    # libpq's text names the host, port, role and database: the teacher's log only, never a page.
                    log.warning("Memora: the PostgreSQL store at %s (role %s) failed: %s", self.place, self._role, self._safe(error))
                    raise StoreError(f"PostgreSQL: {_reason(error)}; the server's log says where and why") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self.lock:
            self._drop()

    @functools.cached_property
    def _role(self) -> str:
        from urllib.parse import unquote

        userinfo = self.url.partition("://")[2].rpartition("@")[0]
        return unquote(userinfo.partition(":")[0]) or "(libpq's default)"

    def _safe(self, error: Exception) -> str:
        # libpq's own messages may quote the URL or its password (a malformed one, say): redacted in any form.
        from memora.backends.redaction import redact, url_secrets

        return redact(f"{type(error).__name__}: {error}".strip(), url_secrets(self.url))

    def _connect(self) -> Any:
        import psycopg

        if self._connection is None or self._connection.closed:
            connection = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                for statement in self.schema.split(";"):
                    connection.execute(statement)
            self._connection = connection
        return self._connection

    def _drop(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None


def _reason(error: Exception) -> str:
    """What a student may read of a psycopg error: its class and SQLSTATE (``28P01``: the password was refused;
    none: the server could not be reached), never libpq's own text."""
    code = getattr(error, "sqlstate", None)
    return f"{type(error).__name__}, SQLSTATE {code}" if code else type(error).__name__


class PostgresStore:
    """``ConversationStore`` on a PostgreSQL database (``postgresql://user:password@host:port/db``)."""

    def __init__(self, url: str, caps: StoreCaps | None = None) -> None:
        self.db = PostgresConnection(url, _SCHEMA)
        self.caps = caps or StoreCaps()
        self._unreleased = Unreleased()

    def load(self, conversation_id: str, owner: str) -> StoredConversation | None:
        query = "SELECT id, version, payload, updated_at FROM memora_conversations WHERE id = %s AND owner = %s"
        row = self.db.run(lambda c: c.execute(query, (conversation_id, owner)).fetchone())
        return None if row is None else StoredConversation(*row)

    def save(
        self, conversation_id: str, payload: str, expected_version: int, owner: str, *, forked_from: str | None = None
    ) -> StoredConversation:
        size = len(payload.encode())

        def write(c: Any) -> StoredConversation:
            if self.caps.new_per_hour is not None or self.caps.store_bytes is not None:
                c.execute("SELECT pg_advisory_xact_lock(%s)", (CAPS_LOCK,))
            # A deletion holds its row's lock until its tombstone commits: waiting for the lock of the row this one
            # copies (FOR UPDATE) makes the check below see that tombstone, so a copy never outlives its deletion.
            if forked_from is not None:
                c.execute("SELECT 1 FROM memora_conversations WHERE id = %s FOR UPDATE", (forked_from,))
            gone = _tombstone(c, owner, conversation_id, forked_from)
            if gone is not None:
                raise gone
            row = c.execute("SELECT version, owner, size FROM memora_conversations WHERE id = %s FOR UPDATE", (conversation_id,)).fetchone()
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
                    "INSERT INTO memora_conversations (id, version, payload, owner, created_at, size) VALUES (%s, 1, %s, %s, now(), %s) "
                    "ON CONFLICT (id) DO NOTHING RETURNING updated_at",
                    (conversation_id, payload, owner, size),
                ).fetchone()
            else:
                written = c.execute(
                    "UPDATE memora_conversations SET version = version + 1, payload = %s, size = %s, updated_at = now() "
                    "WHERE id = %s AND version = %s RETURNING updated_at",
                    (payload, size, conversation_id, expected_version),
                ).fetchone()
            if written is None:  # another process inserted this id between the SELECT and the INSERT
                raise VersionConflict(conversation_id, expected_version, None)
            return StoredConversation(conversation_id, expected_version + 1, payload, written[0])

        return self.db.run(write)

    def book(self, request: RoomRequest) -> Admission:
        unreleased = self._unreleased.pending()

        def book(c: Any) -> Admission:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (CAPS_LOCK,))  # every process books one turn at a time
            if unreleased:
                c.execute("DELETE FROM memora_room_bookings WHERE holder = ANY(%s)", (unreleased,))
            gone = _tombstone(c, request.owner, request.conversation_id if request.version else None, None)
            if gone is not None:
                return Admission(gone)
            query = "SELECT version, owner, size FROM memora_conversations WHERE id = %s"
            found = c.execute(query, (request.conversation_id,)).fetchone()
            others = [
                Booked(*row)
                for row in c.execute(
                    "SELECT conversation_id, owner, size, new, holder FROM memora_room_bookings WHERE holder != %s AND expires_at > now()",
                    (request.holder,),
                )
            ]
            if dead := dead_holders(b.holder for b in others):  # left by a process of this machine that was killed
                c.execute("DELETE FROM memora_room_bookings WHERE holder = ANY(%s)", (dead,))
                others = [b for b in others if b.holder not in dead]
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
                    "INSERT INTO memora_room_bookings (holder, owner, conversation_id, size, new, expires_at) "
                    "VALUES (%s, %s, %s, %s, %s, now() + %s) ON CONFLICT (holder) DO UPDATE SET owner = excluded.owner, "
                    "conversation_id = excluded.conversation_id, size = excluded.size, new = excluded.new, "
                    "expires_at = excluded.expires_at",
                    (request.holder, request.owner, request.conversation_id, admission.size, admission.new, lease),
                )
            return admission

        admission = self.db.run(book)
        self._unreleased.dropped(unreleased)
        return admission

    def release(self, holder: str) -> None:
        self._unreleased.add(holder)  # until the deletion is written: then the next booking drops it
        self.db.run(lambda c: c.execute("DELETE FROM memora_room_bookings WHERE holder = %s", (holder,)))
        self._unreleased.dropped([holder])

    def delete(self, conversation_id: str, owner: str) -> bool:
        def delete(c: Any) -> bool:
            deleted = c.execute("DELETE FROM memora_conversations WHERE id = %s AND owner = %s", (conversation_id, owner)).rowcount
            if c.execute("SELECT 1 FROM memora_conversations WHERE id = %s", (conversation_id,)).fetchone() is None:
                _bury(c, "conversation", conversation_id)  # never for another owner's row: nobody may bury what is not theirs
            return bool(deleted)

        return bool(self.db.run(delete))

    def delete_owner(self, owner: str) -> int:
        def delete(c: Any) -> int:
            deleted = int(c.execute("DELETE FROM memora_conversations WHERE owner = %s", (owner,)).rowcount)
            _bury(c, "owner", owner)
            return deleted

        return int(self.db.run(delete))

    def delete_idle(self, idle_for: timedelta) -> int:
        def sweep(c: Any) -> int:
            c.execute("DELETE FROM memora_tombstones WHERE deleted_at < now() - %s", (idle_for,))
            c.execute("DELETE FROM memora_room_bookings WHERE expires_at < now()")
            return int(c.execute("DELETE FROM memora_conversations WHERE updated_at < now() - %s", (idle_for,)).rowcount)

        return self.db.run(sweep)

    def close(self) -> None:
        self.db.close()

    def _new_this_hour(self, c: Any, owner: str) -> int:
        if self.caps.new_per_hour is None:
            return 0
        query = "SELECT COUNT(*) FROM memora_conversations WHERE owner = %s AND created_at > now() - interval '1 hour'"
        return int(c.execute(query, (owner,)).fetchone()[0])

    def _total(self, c: Any) -> int:
        if self.caps.store_bytes is None:
            return 0
        return int(c.execute("SELECT COALESCE(SUM(size), 0) FROM memora_conversations").fetchone()[0])


def _bury(c: Any, kind: str, key: str) -> None:
    c.execute(
        "INSERT INTO memora_tombstones (kind, key) VALUES (%s, %s) ON CONFLICT (kind, key) DO UPDATE SET deleted_at = now()", (kind, key)
    )


def _tombstone(c: Any, owner: str, conversation_id: str | None, forked_from: str | None) -> Gone | None:
    """Gone when ``owner`` was forgotten, or ``conversation_id`` or ``forked_from`` (None: not asked) deleted."""
    if c.execute("SELECT 1 FROM memora_tombstones WHERE kind = 'owner' AND key = %s", (owner,)).fetchone():
        return Gone("browser")
    keys = [key for key in (conversation_id, forked_from) if key is not None]
    if keys and c.execute("SELECT 1 FROM memora_tombstones WHERE kind = 'conversation' AND key = ANY(%s)", (keys,)).fetchone():
        return Gone("conversation")
    return None
