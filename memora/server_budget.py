"""The classroom's server-wide token budget: every session's model requests, summed, in one SQLite file.

A per-session cap resets with Reset or a new tab; this one does not. Each
``ServerLedger`` opens its own short-lived connection per call, so any number
of sessions (threads of one Streamlit server, or several server processes on
the same file) can share it; SQLite serialises the writes, and the file
survives a restart. The check happens before each request and the spend is
recorded after it, so requests already in flight when the budget runs out may
finish: the total can pass the cap by at most what those requests cost.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memora.limits import LimitReached

DEFAULT_DATA_DIR = "~/.memora"
USAGE_DB_NAME = "usage.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL
)
"""


class ServerBudgetReached(LimitReached):
    """Every session together has spent the server's budget (``MEMORA_MAX_SERVER_TOKENS``)."""


class CappedSpend:
    """A server-wide ledger: ``spent()`` and ``record()`` where it keeps them, and the check they share."""

    max_tokens: int

    def spent(self) -> int:
        raise NotImplementedError

    def record(self, tokens: int, kind: str, *, estimated: bool = False) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raises ServerBudgetReached when the recorded spend has reached ``max_tokens``; else returns None."""
        spent = self.spent()
        if spent >= self.max_tokens:
            raise ServerBudgetReached(
                "server_tokens",
                spent,
                self.max_tokens,
                f"The classroom's shared budget is spent: {spent:,} of {self.max_tokens:,} tokens, "
                "across every conversation on this server.",
            )


@dataclass(frozen=True)
class ServerLedger(CappedSpend):
    """Token spend of every session on this server, persisted in ``path`` and capped at ``max_tokens``.

    The file and its folder are created on first use. With a PostgreSQL store several servers
    share ``memora.store.postgres_ledger.PostgresServerLedger`` instead.
    """

    path: Path
    max_tokens: int

    @classmethod
    def in_dir(cls, data_dir: str | Path, max_tokens: int) -> ServerLedger:
        return cls(Path(data_dir).expanduser() / USAGE_DB_NAME, max_tokens)

    def spent(self) -> int:
        """Tokens recorded so far, by every session since the file was made."""
        with self._connect() as connection:
            return int(connection.execute("SELECT COALESCE(SUM(tokens), 0) FROM requests").fetchone()[0])

    def record(self, tokens: int, kind: str, *, estimated: bool = False) -> None:
        """Adds one request's tokens; ``estimated`` when the server reported none (a stopped stream, say)."""
        if tokens <= 0:
            return
        at = datetime.now(UTC).isoformat(timespec="seconds")
        with self._connect() as connection:
            connection.execute("INSERT INTO requests (at, kind, tokens, estimated) VALUES (?, ?, ?, ?)", (at, kind, tokens, int(estimated)))

    def _connect(self) -> _Closing:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # 30 s: other sessions' writes are single inserts, so a wait this long means something is wrong.
        connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        connection.execute(_SCHEMA)
        return _Closing(connection)


class _Closing:
    """``with`` that closes the connection, which sqlite3's own context manager does not."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> sqlite3.Connection:
        return self.connection

    def __exit__(self, *exc: object) -> None:
        self.connection.close()
