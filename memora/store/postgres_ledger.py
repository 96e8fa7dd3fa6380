"""The classroom's server-wide budget in PostgreSQL: every process that shares the conversation store shares it too.

Same behaviour as ``memora.server_budget.ServerLedger`` (checked before each request, recorded after
it, kept across restarts), in a table beside the conversations. Each call opens a short-lived
connection, as the SQLite ledger does, so no session holds one between its requests. A database that
cannot be reached fails the check with StoreError: the request is refused rather than sent unbudgeted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memora.server_budget import CappedSpend
from memora.store.postgres import PostgresConnection

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memora_server_requests (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL,
    kind TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    estimated BOOLEAN NOT NULL
)
"""


@dataclass(frozen=True)
class PostgresServerLedger(CappedSpend):
    """Token spend of every process on the database at ``url``, capped at ``max_tokens``."""

    url: str = ""
    max_tokens: int = 0

    def spent(self) -> int:
        """Tokens recorded so far, by every session of every process sharing the database."""
        return int(self._run(lambda c: c.execute("SELECT COALESCE(SUM(tokens), 0) FROM memora_server_requests").fetchone()[0]))

    def record(self, tokens: int, kind: str, *, estimated: bool = False) -> None:
        """Adds one request's tokens; ``estimated`` when the server reported none (a stopped stream, say)."""
        if tokens <= 0:
            return
        at = datetime.now(UTC)
        self._run(
            lambda c: c.execute(
                "INSERT INTO memora_server_requests (at, kind, tokens, estimated) VALUES (%s, %s, %s, %s)", (at, kind, tokens, estimated)
            )
        )

    def _run(self, work: Any) -> Any:
        db = PostgresConnection(self.url, _SCHEMA)
        try:
            return db.run(work)
        finally:
            db.close()
