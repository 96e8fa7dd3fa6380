"""The shared store: PostgreSQL through psycopg 3, so several Streamlit processes or machines serve one class.

One connection per store object behind one lock, opened on first use and opened again after it breaks,
so a database restart costs one failed save (which the page retries) rather than a dead page. The
version check is in the UPDATE's WHERE clause: two processes saving the same version cannot both win.
"""

from __future__ import annotations

import functools
import threading
from datetime import timedelta
from typing import Any

from memora.store.base import StoredConversation, StoreError, VersionConflict

CONNECT_TIMEOUT_S = 5
_SCHEMA = """
CREATE TABLE IF NOT EXISTS memora_conversations (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS memora_conversations_updated_at ON memora_conversations (updated_at)
"""
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
        from memora.redaction import redact, url_secrets

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
                    raise StoreError(f"the PostgreSQL store failed: {self._safe(error)}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self.lock:
            self._drop()

    def _safe(self, error: Exception) -> str:
        # libpq's own messages may quote the URL or its password (a malformed one, say): redacted in any form.
        from memora.redaction import redact, url_secrets

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


class PostgresStore:
    """``ConversationStore`` on a PostgreSQL database (``postgresql://user:password@host:port/db``)."""

    def __init__(self, url: str) -> None:
        self.db = PostgresConnection(url, _SCHEMA)

    def load(self, conversation_id: str) -> StoredConversation | None:
        query = "SELECT id, version, payload, updated_at FROM memora_conversations WHERE id = %s"
        row = self.db.run(lambda c: c.execute(query, (conversation_id,)).fetchone())
        return None if row is None else StoredConversation(*row)

    def save(self, conversation_id: str, payload: str, expected_version: int) -> StoredConversation:
        def write(c: Any) -> StoredConversation:
            if expected_version == 0:
                row = c.execute(
                    "INSERT INTO memora_conversations (id, version, payload) VALUES (%s, 1, %s) "
                    "ON CONFLICT (id) DO NOTHING RETURNING updated_at",
                    (conversation_id, payload),
                ).fetchone()
            else:
                row = c.execute(
                    "UPDATE memora_conversations SET version = version + 1, payload = %s, updated_at = now() "
                    "WHERE id = %s AND version = %s RETURNING updated_at",
                    (payload, conversation_id, expected_version),
                ).fetchone()
            if row is None:
                found = c.execute("SELECT version FROM memora_conversations WHERE id = %s", (conversation_id,)).fetchone()
                raise VersionConflict(conversation_id, expected_version, None if found is None else found[0])
            return StoredConversation(conversation_id, expected_version + 1, payload, row[0])

        return self.db.run(write)

    def delete_idle(self, idle_for: timedelta) -> int:
        return self.db.run(lambda c: c.execute("DELETE FROM memora_conversations WHERE updated_at < now() - %s", (idle_for,)).rowcount)

    def close(self) -> None:
        self.db.close()
