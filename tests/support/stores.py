"""The two real stores the contract runs against, and the one fault a real store cannot be made to produce on cue.

PostgreSQL is the one ``.ci/run`` starts (``MEMORA_TEST_POSTGRES_URL``). Without that URL the
PostgreSQL tests skip with the reason, unless CI is set: then a missing database is a failure.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from memora.classroom.store import StoreError
from memora.classroom.store.base import Admission, RoomRequest, StoreCaps, StoredConversation
from memora.classroom.store.owner import new_owner
from memora.classroom.store.sqlite import SqliteStore

POSTGRES_URL_VARIABLE = "MEMORA_TEST_POSTGRES_URL"
OWNER = new_owner()
"""The owner hash of the browser most store tests save for."""


def require_postgres_url() -> str:
    """The test database's URL; skips (fails under CI) without one. A test asks for the ``postgres_url`` fixture
    instead, so that its tier follows; this is for code that makes a store of a kind marked so (``STORE_KINDS``)."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        reason = f"the PostgreSQL store tests need {POSTGRES_URL_VARIABLE} (.ci/run starts Debian's PostgreSQL and sets it)"
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)
    return url


@pytest.fixture
def postgres_url() -> str:
    """The test database's URL. A test that asks for it, itself or through another fixture, is in the integration
    tier whatever its module (tests/conftest.py); it skips (fails under CI) without the URL."""
    return require_postgres_url()


STORE_KINDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.integration))
"""The stores a contract test runs against, for ``make_store``: the PostgreSQL one is marked integration here, where
it is made, so its tier never depends on the test's name."""


def empty_postgres_store(url: str, caps: StoreCaps | None = None):
    """A PostgresStore on ``url`` whose tables start empty (the test database is the suite's own)."""
    from memora.classroom.store.postgres import PostgresStore

    store = PostgresStore(url, caps)
    for table in ("memora_conversations", "memora_tombstones", "memora_room_bookings"):
        store.db.run(lambda c, table=table: c.execute(f"DELETE FROM {table}"))
    return store


def make_store(kind: str, tmp_path: Path, caps: StoreCaps | None = None):
    if kind == "sqlite":
        return SqliteStore(tmp_path / "data" / "conversations.sqlite3", caps)
    return empty_postgres_store(require_postgres_url(), caps)


def backdate(store, conversation_id: str, days: float) -> None:
    """Makes a conversation look last saved ``days`` ago, as an idle one would be: SQL on the real table."""
    if isinstance(store, SqliteStore):
        with store._lock:
            store._connect().execute(
                "UPDATE conversations SET updated_at = updated_at - ? WHERE id = ?", (timedelta(days=days).total_seconds(), conversation_id)
            )
    else:
        store.db.run(
            lambda c: c.execute(
                "UPDATE memora_conversations SET updated_at = updated_at - %s WHERE id = %s", (timedelta(days=days), conversation_id)
            )
        )


def owned(store, owner: str = OWNER) -> int:
    """How many conversations ``owner`` has in the store, counted in SQL on the real table."""
    if isinstance(store, SqliteStore):
        with store._lock:
            return store._connect().execute("SELECT COUNT(*) FROM conversations WHERE owner = ?", (owner,)).fetchone()[0]
    return store.db.run(lambda c: c.execute("SELECT COUNT(*) FROM memora_conversations WHERE owner = %s", (owner,)).fetchone()[0])


def write_raw(store, conversation_id: str, payload: str, owner: str = OWNER) -> None:
    """Puts ``payload`` in the store as it is, as someone with write access to the database could."""
    store.save(conversation_id, payload, 0, owner)


class FlakyStore:
    """A real store that fails every call while ``down`` is set, as a database that went away would; records the saves."""

    def __init__(self, inner) -> None:
        self.inner, self.down, self.saves = inner, False, []

    def load(self, conversation_id: str, owner: str) -> StoredConversation | None:
        self._check()
        return self.inner.load(conversation_id, owner)

    def save(
        self, conversation_id: str, payload: str, expected_version: int, owner: str, *, forked_from: str | None = None
    ) -> StoredConversation:
        self.saves.append((conversation_id, expected_version, self.down))
        self._check()
        return self.inner.save(conversation_id, payload, expected_version, owner, forked_from=forked_from)

    def book(self, request: RoomRequest) -> Admission:
        self._check()
        return self.inner.book(request)

    def release(self, holder: str) -> None:
        self._check()
        self.inner.release(holder)

    def running(self, conversation_id: str, holder: str, owner: str | None = None) -> bool:
        self._check()
        return self.inner.running(conversation_id, holder, owner)

    def delete(self, conversation_id: str, owner: str) -> bool:
        self._check()
        return self.inner.delete(conversation_id, owner)

    def delete_owner(self, owner: str) -> int:
        self._check()
        return self.inner.delete_owner(owner)

    def delete_idle(self, idle_for: timedelta) -> int:
        self._check()
        return self.inner.delete_idle(idle_for)

    def close(self) -> None:
        self.inner.close()

    def _check(self) -> None:
        if self.down:
            raise StoreError("the conversation store failed: OperationalError: disk I/O error")
