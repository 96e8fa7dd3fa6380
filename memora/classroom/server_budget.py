"""The classroom's server-wide token budget: every session's model requests, booked before they are
sent.

A per-session cap resets with Reset or a new tab; this one does not. Before a request is sent,
``reserve`` books its largest possible cost (its input plus its output cap) in one atomic step that
succeeds only while ``spent + reserved + this request <= max_tokens``; once it is answered,
``settle`` replaces the booking with what the server billed (estimated when it reported nothing). No
number of sessions, threads or processes sending at once can pass the cap: each holds its worst case
until its bill is known. The SQLite ledger takes SQLite's write lock for the booking (``BEGIN
IMMEDIATE``), the PostgreSQL one (``memora.classroom.postgres_ledger``) an advisory lock; both keep
their rows across restarts.

Edge cases, decided so that the cap is never passed:

- A booking left open by a process that died mid-request (``settled = 0``) stays counted at its full
  size for good: nobody knows what that request was billed, and its largest possible cost is the
  only figure that cannot let the cap be passed. An operator who knows better may settle or delete
  the row.
- A settlement that cannot be written (a full or read-only disk, a database down) is held in memory,
  process-wide (``HELD``), counted by ``standing`` meanwhile, and written by the next call that
  reaches the store; the server logs one warning line when the first one is held. The booking it
  replaces is already stored, so even a crash before it is written leaves the request counted, at
  its largest cost.
- A booking that cannot be written refuses the request before anything is sent
  (``ServerBudgetUnavailable``): nothing is billed, so nothing is lost.
- A request whose own largest cost is above ``max_tokens`` can never be booked: it is refused.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memora.classroom.limits import LimitReached
from memora.classroom.store.base import StoreError

DEFAULT_DATA_DIR = "~/.memora"
USAGE_DB_NAME = "usage.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    settled INTEGER NOT NULL DEFAULT 1
)
"""
# A ledger made before bookings has no ``settled`` column: its rows are all settled spend.
_MIGRATION = "ALTER TABLE requests ADD COLUMN settled INTEGER NOT NULL DEFAULT 1"

log = logging.getLogger(__name__)
_READY: set[Path] = set()
"""Budget files whose table this process has made or migrated."""


class ServerBudgetReached(LimitReached):
    """Every session together has spent or booked the server's budget
    (``MEMORA_MAX_SERVER_TOKENS``)."""


class ServerBudgetUnavailable(StoreError):
    """The shared budget's store could not book a request, so it was not sent; the message is safe
    to show."""


@dataclass(frozen=True)
class Reservation:
    """One request's booking (row ``id``): ``tokens`` is its largest possible cost, held until it is
    settled."""

    id: int
    tokens: int
    kind: str


@dataclass(frozen=True)
class Settlement:
    """What a booked request really cost: ``tokens`` as billed, ``estimated`` when counted locally
    instead."""

    reservation: Reservation
    tokens: int
    estimated: bool


@dataclass(frozen=True)
class Standing:
    """The budget as it stands: ``spent`` by finished requests (``unsaved`` of it held in memory,
    not yet written), ``reserved`` for requests in flight (or left open by a process that died), of
    ``max_tokens``."""

    spent: int
    reserved: int
    unsaved: int
    max_tokens: int


class HeldSettlements:
    """Settlements not written yet, per ledger place, shared by every session of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, dict[int, Settlement]] = {}

    def hold(self, place: str, settlement: Settlement) -> bool:
        """Keeps ``settlement`` until it is written; True when it is the first held for ``place``
        (then log)."""
        with self._lock:
            held = self._held.setdefault(place, {})
            first = not held
            held[settlement.reservation.id] = settlement
            return first

    def pending(self, place: str) -> tuple[Settlement, ...]:
        with self._lock:
            return tuple(self._held.get(place, {}).values())

    def release(self, place: str, settlements: Sequence[Settlement]) -> None:
        """Forgets ``settlements``, now written (or found settled already)."""
        with self._lock:
            held = self._held.get(place, {})
            for settlement in settlements:
                if held.get(settlement.reservation.id) is settlement:
                    del held[settlement.reservation.id]


HELD = HeldSettlements()


@dataclass(frozen=True)
class Booking:
    """What the store answered to a booking: the new row's id, or None when it did not fit, and the
    total before it."""

    id: int | None
    total: int


class CappedSpend:
    """A server-wide ledger of bookings; subclasses say where its rows live (``_book``, ``_write``,
    ``_rows``).

    Their three methods raise StoreError when the store cannot be reached, read or written.
    """

    max_tokens: int

    @property
    def place(self) -> str:
        """Names this ledger's store for ``HELD``; it holds no secret."""
        raise NotImplementedError

    def _book(self, tokens: int, kind: str, extra: int) -> Booking:
        """Atomically: a row of ``tokens`` not settled, if the stored total plus ``extra`` plus
        ``tokens`` fits."""
        raise NotImplementedError

    def _write(self, settlements: Sequence[Settlement]) -> None:
        """Settles the rows of ``settlements``, in one transaction; a row settled already is left as
        it is."""
        raise NotImplementedError

    def _rows(self) -> tuple[int, dict[int, int]]:
        """The settled total, and each open booking's id and tokens."""
        raise NotImplementedError

    def reserve(self, tokens: int, kind: str) -> Reservation:
        """Books ``tokens`` (a request's largest possible cost) before the request is sent.

        Raises ServerBudgetReached when spent plus reserved plus ``tokens`` would pass
        ``max_tokens``, and ServerBudgetUnavailable when the store cannot book it; in both cases
        nothing may be sent.
        """
        self.write_held()
        held = HELD.pending(self.place)
        # A held bill above its booking is spend the store does not know yet.
        extra = sum(max(0, s.tokens - s.reservation.tokens) for s in held)
        try:
            booking = self._book(tokens, kind, extra)
        except StoreError as error:
            raise ServerBudgetUnavailable(
                f"the classroom's shared budget could not be reached, so nothing was sent ({error})"
            ) from None
        if booking.id is None:
            raise ServerBudgetReached(
                "server_tokens",
                booking.total,
                self.max_tokens,
                f"The classroom's shared budget cannot cover this request: {booking.total:,} of "
                f"{self.max_tokens:,} tokens are spent or held for replies in progress, and this "
                f"request may cost up to {tokens:,}.",
            )
        return Reservation(booking.id, tokens, kind)

    def settle(self, reservation: Reservation, tokens: int, *, estimated: bool = False) -> bool:
        """Replaces ``reservation`` with what the request cost; never raises.

        True when it is written. When the store cannot take it, it is held in memory (``HELD``) and
        written by the next call that reaches the store, and the first one held logs one warning.
        """
        settlement = Settlement(reservation, max(0, tokens), estimated)
        try:
            self._write((*HELD.pending(self.place), settlement))
        except StoreError as error:
            if HELD.hold(self.place, settlement):
                log.warning(
                    "Classroom budget: the spend of a billed %s request (%d tokens) could not be "
                    "written (%s); it is held in memory, counted against the budget, and written "
                    "once the store is back.",
                    reservation.kind,
                    settlement.tokens,
                    error,
                )
            return False
        HELD.release(self.place, HELD.pending(self.place))
        return True

    def write_held(self) -> bool:
        """Writes the settlements held in memory, if any; True when none is left. Never raises."""
        held = HELD.pending(self.place)
        if not held:
            return True
        try:
            self._write(held)
        except StoreError:
            return False
        HELD.release(self.place, held)
        log.info("Classroom budget: %d held settlement(s) written.", len(held))
        return True

    def standing(self) -> Standing:
        """Spent and reserved tokens of every session so far, held settlements included.

        Writes the held settlements first when it can. Raises StoreError when the store cannot be
        read.
        """
        self.write_held()
        spent, open_rows = self._rows()
        unsaved = 0
        for settlement in HELD.pending(self.place):
            if open_rows.pop(settlement.reservation.id, None) is not None:
                spent += settlement.tokens
                unsaved += settlement.tokens
        return Standing(spent, sum(open_rows.values()), unsaved, self.max_tokens)

    def spent(self) -> int:
        """Tokens billed so far by every session (held settlements included). Raises StoreError when
        unreadable."""
        return self.standing().spent

    def unsaved(self) -> int:
        """Tokens of this process's settlements not written yet; read from memory only, never
        raises."""
        return sum(s.tokens for s in HELD.pending(self.place))


@dataclass(frozen=True)
class ServerLedger(CappedSpend):
    """Token spend of every session on this server, persisted in ``path`` and capped at
    ``max_tokens``.

    The file and its folder are created on first use; a file made by an older Memora is migrated in
    place. With a PostgreSQL store several servers share
    ``memora.classroom.postgres_ledger.PostgresServerLedger`` instead.
    """

    path: Path
    max_tokens: int

    @classmethod
    def in_dir(cls, data_dir: str | Path, max_tokens: int) -> ServerLedger:
        return cls(Path(data_dir).expanduser() / USAGE_DB_NAME, max_tokens)

    @property
    def place(self) -> str:
        return f"sqlite:{self.path}"

    def _book(self, tokens: int, kind: str, extra: int) -> Booking:
        with self._connect() as connection:
            # IMMEDIATE takes the write lock before reading the total: no other process books in
            # between.
            connection.execute("BEGIN IMMEDIATE")
            try:
                total = (
                    int(
                        connection.execute(
                            "SELECT COALESCE(SUM(tokens), 0) FROM requests"
                        ).fetchone()[0]
                    )
                    + extra
                )
                if total + tokens > self.max_tokens:
                    connection.execute("ROLLBACK")
                    return Booking(None, total)
                row = connection.execute(
                    "INSERT INTO requests (at, kind, tokens, estimated, settled) "
                    "VALUES (?, ?, ?, 0, 0)",
                    (_now(), kind, tokens),
                )
                connection.execute("COMMIT")
                return Booking(row.lastrowid, total)
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def _write(self, settlements: Sequence[Settlement]) -> None:
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany(
                    "UPDATE requests SET tokens = ?, estimated = ?, settled = 1, at = ? "
                    "WHERE id = ? AND settled = 0",
                    [(s.tokens, int(s.estimated), _now(), s.reservation.id) for s in settlements],
                )
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def _rows(self) -> tuple[int, dict[int, int]]:
        with self._connect() as connection:
            spent = int(
                connection.execute(
                    "SELECT COALESCE(SUM(tokens), 0) FROM requests WHERE settled = 1"
                ).fetchone()[0]
            )
            return spent, dict(
                connection.execute("SELECT id, tokens FROM requests WHERE settled = 0").fetchall()
            )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A short-lived connection (sqlite3's own context manager does not close it); its errors
        become StoreError."""
        connection = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if (
                not self.path.exists()
            ):  # deleted for a new term while the server runs: its table is made again
                _READY.discard(self.path)
            # 30 s: other sessions' writes are single bookings, so a wait this long means something
            # is wrong.
            connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            if (
                self.path not in _READY
            ):  # once per file and process: the Status panel reads it on every run
                connection.execute(_SCHEMA)
                if "settled" not in {
                    row[1] for row in connection.execute("PRAGMA table_info(requests)")
                }:
                    connection.execute(_MIGRATION)
                _READY.add(self.path)
            yield connection
        except (sqlite3.Error, OSError) as error:
            # An OSError's own text names the path: only its reason is kept, since students may read
            # it.
            reason = error.strerror if isinstance(error, OSError) else str(error)
            raise StoreError(f"the budget file failed: {type(error).__name__}: {reason}") from None
        finally:
            if connection is not None:
                connection.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
