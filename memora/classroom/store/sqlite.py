"""The default store: one SQLite file (stdlib ``sqlite3``), created with its folder on first use.

One connection, in WAL mode, behind one lock: the threads of one Streamlit process take turns, and a
save is one short transaction. Several processes may open the same file (WAL lets readers go on
while one writes); for several machines use PostgreSQL (``memora.classroom.store.postgres``).

A deletion (``delete``, ``delete_owner``) leaves none of the conversation's text in the file: freed
pages are zeroed (``secure_delete``) and the write-ahead log, which holds every earlier save, is
emptied.

A file made before conversations had owners is migrated in place when it is opened: the new columns
are added, its old rows keep a NULL owner (so no browser opens them; the idle sweep removes them)
and their sizes are filled in so that they count against the store's cap. The tombstones and the
turns' room bookings (``base``) are tables of their own, made when missing.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
    admit_turn,
)
from memora.classroom.store.holders import dead_holders

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_updated_at ON conversations (updated_at);
CREATE TABLE IF NOT EXISTS tombstones (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    deleted_at REAL NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE TABLE IF NOT EXISTS room_bookings (
    holder TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    size INTEGER NOT NULL,
    new INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
"""
_ADDED_COLUMNS = (("owner", "TEXT"), ("created_at", "REAL"), ("size", "INTEGER NOT NULL DEFAULT 0"))
"""Columns added since the first schema (owners and caps); a file without them gets them when
opened."""
_AFTER_MIGRATION = """
CREATE INDEX IF NOT EXISTS conversations_owner_created ON conversations (owner, created_at);
UPDATE conversations SET size = length(CAST(payload AS BLOB)) WHERE size = 0;
"""
HOUR_S = 3600.0


class SqliteStore:
    """``ConversationStore`` on the SQLite file at ``path``; opened lazily, so a bad path fails a
    save, not the page."""

    def __init__(self, path: str | Path, caps: StoreCaps | None = None) -> None:
        self.path = Path(path).expanduser()
        self.caps = caps or StoreCaps()
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._unreleased = Unreleased()

    def load(self, conversation_id: str, owner: str) -> StoredConversation | None:
        with self._lock, _errors():
            query = (
                "SELECT id, version, payload, updated_at FROM conversations "
                "WHERE id = ? AND owner = ? AND NOT EXISTS (SELECT 1 FROM tombstones "
                "WHERE (kind = 'conversation' AND key = ?) OR (kind = 'owner' AND key = ?))"
            )
            row = (
                self._connect()
                .execute(query, (conversation_id, owner, conversation_id, owner))
                .fetchone()
            )
        return (
            None
            if row is None
            else StoredConversation(row[0], row[1], row[2], datetime.fromtimestamp(row[3], UTC))
        )

    def save(
        self,
        conversation_id: str,
        payload: str,
        expected_version: int,
        owner: str,
        *,
        forked_from: str | None = None,
    ) -> StoredConversation:
        now = datetime.now(UTC)
        size = len(payload.encode())
        with self._lock, _errors():
            connection = self._connect()
            # BEGIN IMMEDIATE takes the write lock first, so nothing read below can change before
            # the write.
            connection.execute("BEGIN IMMEDIATE")
            try:
                _check_tombstones(connection, owner, conversation_id, forked_from)
                row = connection.execute(
                    "SELECT version, owner, size FROM conversations WHERE id = ?",
                    (conversation_id,),
                ).fetchone()
                self.caps.admit(
                    conversation_id,
                    expected_version,
                    owner,
                    row,
                    size=size,
                    new_this_hour=lambda: self._new_this_hour(connection, owner, now),
                    store_total=self._total(connection),
                )
                connection.execute(
                    "INSERT INTO conversations "
                    "(id, version, payload, updated_at, owner, created_at, size) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET "
                    "version = excluded.version, payload = excluded.payload, "
                    "updated_at = excluded.updated_at, size = excluded.size",
                    (
                        conversation_id,
                        expected_version + 1,
                        payload,
                        now.timestamp(),
                        owner,
                        now.timestamp(),
                        size,
                    ),
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        return StoredConversation(conversation_id, expected_version + 1, payload, now)

    def book(self, request: RoomRequest) -> Admission:
        now = datetime.now(UTC)
        with self._lock, _errors():
            connection = self._connect()
            connection.execute(
                "BEGIN IMMEDIATE"
            )  # every booking and save waits: no two turns weigh the same bytes
            unreleased = self._unreleased.pending()
            try:
                connection.executemany(
                    "DELETE FROM room_bookings WHERE holder = ?",
                    [(holder,) for holder in unreleased],
                )
                admission = self._admit(connection, request, now)
                if admission.refusal is None:
                    expires = now.timestamp() + BOOKING_LEASE_S
                    connection.execute(
                        "INSERT OR REPLACE INTO room_bookings "
                        "(holder, owner, conversation_id, size, new, expires_at) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            request.holder,
                            request.owner,
                            request.conversation_id,
                            admission.size,
                            int(admission.new),
                            expires,
                        ),
                    )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        self._unreleased.dropped(unreleased)
        return admission

    def _admit(
        self, connection: sqlite3.Connection, request: RoomRequest, now: datetime
    ) -> Admission:
        gone = _tombstone(
            connection, request.owner, request.conversation_id if request.version else None, None
        )
        if gone is not None:
            return Admission(gone)
        found = connection.execute(
            "SELECT version, owner, size FROM conversations WHERE id = ?",
            (request.conversation_id,),
        ).fetchone()
        query = (
            "SELECT conversation_id, owner, size, new, holder FROM room_bookings "
            "WHERE holder != ? AND expires_at > ?"
        )
        rows = connection.execute(query, (request.holder, now.timestamp()))
        others = [Booked(c, o, size, bool(new), holder) for c, o, size, new, holder in rows]
        if dead := dead_holders(
            b.holder for b in others
        ):  # left by a process of this machine that was killed
            connection.executemany(
                "DELETE FROM room_bookings WHERE holder = ?", [(holder,) for holder in dead]
            )
            others = [b for b in others if b.holder not in dead]
        return admit_turn(
            self.caps,
            request,
            found,
            others,
            new_this_hour=lambda: self._new_this_hour(connection, request.owner, now),
            store_total=self._total(connection),
        )

    def release(self, holder: str) -> None:
        self._unreleased.add(
            holder
        )  # until the deletion is written: then the next booking drops it
        with self._lock, _errors():
            self._connect().execute("DELETE FROM room_bookings WHERE holder = ?", (holder,))
        self._unreleased.dropped([holder])

    def running(self, conversation_id: str, holder: str, owner: str | None = None) -> bool:
        now = datetime.now(UTC).timestamp()
        with self._lock, _errors():
            query = (
                "SELECT holder FROM room_bookings "
                "WHERE conversation_id = ? AND holder != ? AND (? IS NULL OR owner = ?) "
                "AND expires_at > ?"
            )
            holders = [
                row[0]
                for row in self._connect().execute(
                    query, (conversation_id, holder, owner, owner, now)
                )
            ]
        return bool(set(holders) - set(dead_holders(holders)))

    def delete(self, conversation_id: str, owner: str) -> bool:
        with self._lock, _errors():
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            try:
                deleted = connection.execute(
                    "DELETE FROM conversations WHERE id = ? AND owner = ?", (conversation_id, owner)
                ).rowcount
                theirs = connection.execute(
                    "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
                ).fetchone()
                if theirs is None:
                    # Another owner's row keeps its id alive: nobody may tombstone what is
                    # not theirs.
                    _bury(connection, "conversation", conversation_id)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            if deleted:
                _scrub(connection)
        return deleted > 0

    def delete_owner(self, owner: str) -> int:
        with self._lock, _errors():
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            try:
                deleted = int(
                    connection.execute(
                        "DELETE FROM conversations WHERE owner = ?", (owner,)
                    ).rowcount
                )
                _bury(connection, "owner", owner)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            if deleted:
                _scrub(connection)
        return deleted

    def delete_idle(self, idle_for: timedelta) -> int:
        now = datetime.now(UTC)
        cutoff = (now - idle_for).timestamp()
        with self._lock, _errors():
            connection = self._connect()
            connection.execute("DELETE FROM tombstones WHERE deleted_at < ?", (cutoff,))
            connection.execute("DELETE FROM room_bookings WHERE expires_at < ?", (now.timestamp(),))
            return connection.execute(
                "DELETE FROM conversations WHERE updated_at < ?", (cutoff,)
            ).rowcount

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _new_this_hour(self, connection: sqlite3.Connection, owner: str, now: datetime) -> int:
        if self.caps.new_per_hour is None:
            return 0
        query = "SELECT COUNT(*) FROM conversations WHERE owner = ? AND created_at > ?"
        return int(connection.execute(query, (owner, now.timestamp() - HOUR_S)).fetchone()[0])

    def _total(self, connection: sqlite3.Connection) -> int:
        if self.caps.store_bytes is None:
            return 0
        return int(
            connection.execute("SELECT COALESCE(SUM(size), 0) FROM conversations").fetchone()[0]
        )

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread=False: the lock above serialises every use; replies may commit in a
            # worker thread.
            connection = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            # Freed pages are zeroed, so a deleted conversation's text is not left in the file
            # (Debian's build does this by default, other builds do not).
            connection.execute("PRAGMA secure_delete=ON")
            connection.executescript(_SCHEMA)
            _migrate(connection)
            self._connection = connection
        return self._connection


def _migrate(connection: sqlite3.Connection) -> None:
    """Adds the owner and cap columns to a table made before them, once, even with several processes
    opening it."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        present = {row[1] for row in connection.execute("PRAGMA table_info(conversations)")}
        for name, definition in _ADDED_COLUMNS:
            if name not in present:
                connection.execute(f"ALTER TABLE conversations ADD COLUMN {name} {definition}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    connection.executescript(_AFTER_MIGRATION)


def _bury(connection: sqlite3.Connection, kind: str, key: str) -> None:
    now = datetime.now(UTC).timestamp()
    connection.execute(
        "INSERT OR REPLACE INTO tombstones (kind, key, deleted_at) VALUES (?, ?, ?)",
        (kind, key, now),
    )


def _tombstone(
    connection: sqlite3.Connection, owner: str, conversation_id: str | None, forked_from: str | None
) -> Gone | None:
    """Gone when ``owner`` was forgotten, or ``conversation_id`` or ``forked_from`` (None: not
    asked) deleted."""
    if connection.execute(
        "SELECT 1 FROM tombstones WHERE kind = 'owner' AND key = ?", (owner,)
    ).fetchone():
        return Gone("browser")
    for key in (conversation_id, forked_from):
        if (
            key is not None
            and connection.execute(
                "SELECT 1 FROM tombstones WHERE kind = 'conversation' AND key = ?", (key,)
            ).fetchone()
        ):
            return Gone("conversation")
    return None


def _check_tombstones(
    connection: sqlite3.Connection, owner: str, conversation_id: str, forked_from: str | None
) -> None:
    gone = _tombstone(connection, owner, conversation_id, forked_from)
    if gone is not None:
        raise gone


def _scrub(connection: sqlite3.Connection) -> None:
    """Empties the write-ahead log after a deletion: every earlier save of the deleted row is a
    frame in it until a checkpoint, readable by anyone who can read the file. TRUNCATE copies the
    log into the database (whose freed pages ``secure_delete`` zeroed) and cuts it to 0 bytes; while
    another process is reading, SQLite leaves it for that reader (the next deletion or checkpoint
    truncates it), so this never waits."""
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class _errors:
    """Turns sqlite3's errors (and a folder that cannot be made) into StoreError; VersionConflict
    passes."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _tb: object
    ) -> None:
        if isinstance(error, sqlite3.Error | OSError):
            raise StoreError(
                f"the conversation store failed: {type(error).__name__}: {error}"
            ) from error
