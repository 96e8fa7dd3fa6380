"""The classroom's server-wide budget in PostgreSQL: every process that shares the conversation
store shares it too.

Same behaviour as ``memora.classroom.server_budget.ServerLedger`` (a booking before each request,
settled after it, kept across restarts), in a table beside the conversations. A booking takes an
advisory transaction lock, so that two processes cannot both read a total that leaves room for one
request and both book it. Every ledger of one process on one database borrows from the process's
pool, the one its conversation stores use (``memora.classroom.store.postgres_pool``: opened on first
use, made again after a database restart), so neither a page's Status panel nor a cleared
``st.cache_resource`` costs a connection. A database that cannot be reached refuses the booking
(``ServerBudgetUnavailable``): the request is refused rather than sent unbudgeted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memora.classroom.server_budget import Booking, CappedSpend, Settlement
from memora.classroom.store.postgres_pool import PostgresTables

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memora_server_requests (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL,
    kind TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    estimated BOOLEAN NOT NULL,
    settled BOOLEAN NOT NULL DEFAULT TRUE
);
ALTER TABLE memora_server_requests ADD COLUMN IF NOT EXISTS settled BOOLEAN NOT NULL DEFAULT TRUE
"""
LEDGER_LOCK = 734_522_002
"""The advisory lock every booking takes, so totals are read and booked one at a time across
processes."""


def ledger_tables(url: str) -> PostgresTables:
    """The ledger's table on this process's pool for ``url``."""
    return PostgresTables(url, _SCHEMA)


@dataclass(frozen=True)
class PostgresServerLedger(CappedSpend):
    """Token spend of every process on the database at ``url``, capped at ``max_tokens``."""

    url: str = ""
    max_tokens: int = 0

    def __repr__(self) -> str:  # the URL may hold a password
        return f"PostgresServerLedger({self.place!r}, max_tokens={self.max_tokens})"

    @property
    def place(self) -> str:
        return ledger_tables(self.url).place

    def _book(self, tokens: int, kind: str, extra: int) -> Booking:
        def book(c: Any) -> Booking:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (LEDGER_LOCK,))
            total = (
                int(
                    c.execute(
                        "SELECT COALESCE(SUM(tokens), 0) FROM memora_server_requests"
                    ).fetchone()[0]
                )
                + extra
            )
            if total + tokens > self.max_tokens:
                return Booking(None, total)
            row = c.execute(
                "INSERT INTO memora_server_requests (at, kind, tokens, estimated, settled) "
                "VALUES (%s, %s, %s, FALSE, FALSE) RETURNING id",
                (datetime.now(UTC), kind, tokens),
            ).fetchone()
            return Booking(int(row[0]), total)

        return ledger_tables(self.url).run(book)

    def _write(self, settlements: Sequence[Settlement]) -> None:
        now = datetime.now(UTC)

        def write(c: Any) -> None:
            with c.cursor() as cursor:
                cursor.executemany(
                    "UPDATE memora_server_requests "
                    "SET tokens = %s, estimated = %s, settled = TRUE, at = %s "
                    "WHERE id = %s AND NOT settled",
                    [(s.tokens, s.estimated, now, s.reservation.id) for s in settlements],
                )

        ledger_tables(self.url).run(write)

    def _rows(self) -> tuple[int, dict[int, int]]:
        def read(c: Any) -> tuple[int, dict[int, int]]:
            spent = int(
                c.execute(
                    "SELECT COALESCE(SUM(tokens), 0) FROM memora_server_requests WHERE settled"
                ).fetchone()[0]
            )
            return spent, {
                int(i): int(t)
                for i, t in c.execute(
                    "SELECT id, tokens FROM memora_server_requests WHERE NOT settled"
                )
            }

        return ledger_tables(self.url).run(read)
