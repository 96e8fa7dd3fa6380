"""The default store: one SQLite file (stdlib ``sqlite3``), created with its folder on first use.

One connection, in WAL mode, behind one lock: the threads of one Streamlit process take turns, and a
save is one short transaction. Several processes may open the same file (WAL lets readers go on while
one writes); for several machines use PostgreSQL (``memora.store.postgres``).
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memora.store.base import StoredConversation, StoreError, VersionConflict

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_updated_at ON conversations (updated_at);
"""


class SqliteStore:
    """``ConversationStore`` on the SQLite file at ``path``; opened lazily, so a bad path fails a save, not the page."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    def load(self, conversation_id: str) -> StoredConversation | None:
        with self._lock, _errors():
            query = "SELECT id, version, payload, updated_at FROM conversations WHERE id = ?"
            row = self._connect().execute(query, (conversation_id,)).fetchone()
        return None if row is None else StoredConversation(row[0], row[1], row[2], datetime.fromtimestamp(row[3], UTC))

    def save(self, conversation_id: str, payload: str, expected_version: int) -> StoredConversation:
        now = datetime.now(UTC)
        with self._lock, _errors():
            connection = self._connect()
            # BEGIN IMMEDIATE takes the write lock first, so the version read below cannot change before the write.
            connection.execute("BEGIN IMMEDIATE")
            try:
                row = connection.execute("SELECT version FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
                found = None if row is None else row[0]
                if (found or 0) != expected_version:
                    raise VersionConflict(conversation_id, expected_version, found)
                connection.execute(
                    "INSERT INTO conversations (id, version, payload, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET "
                    "version = excluded.version, payload = excluded.payload, updated_at = excluded.updated_at",
                    (conversation_id, expected_version + 1, payload, now.timestamp()),
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        return StoredConversation(conversation_id, expected_version + 1, payload, now)

    def delete_idle(self, idle_for: timedelta) -> int:
        cutoff = (datetime.now(UTC) - idle_for).timestamp()
        with self._lock, _errors():
            return self._connect().execute("DELETE FROM conversations WHERE updated_at < ?", (cutoff,)).rowcount

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread=False: the lock above serialises every use; replies may commit in a worker thread.
            connection = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
            self._connection = connection
        return self._connection


class _errors:
    """Turns sqlite3's errors (and a folder that cannot be made) into StoreError; VersionConflict passes."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        if isinstance(error, sqlite3.Error | OSError):
            raise StoreError(f"the conversation store failed: {type(error).__name__}: {error}") from error
