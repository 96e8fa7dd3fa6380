"""Whether a turn's holder is alive, by PostgreSQL's own account: a session-level advisory lock its
process holds.

Each process holds one lock on each database it books turns on, ``(PRESENCE_LOCK, key)`` with a
random ``key``, on a connection of its own (``shared_presence``), outside the pool: a pooled
connection would pass the lock to its next borrower, and outlive the process in the pool. A booking
records its process's ``key``; while the lock is held the holder is alive, and once the process is
gone (exited, killed, its machine lost) PostgreSQL drops the lock with its connection. Nothing here
reads a hostname or a pid: two containers or cloned machines may share both.

Edge cases:

- A PostgreSQL restart drops every lock, live processes' too. A live process notices at once (its
  connection breaks while it waits on it) and takes its own key again as soon as the database
  answers. So for ``RESTART_SETTLE_S`` after the database started, a missing lock does not make a
  holder gone (``holder_alive``): by then every live process holds its lock again, and a stopping
  process has finished its grace and its unwind.
- Another process holding this key already (two random 31-bit keys alike) makes this process take a
  new one; its bookings under the old key then read as gone.
- A booking made by an older Memora has no key: its lease alone ends it.
"""

from __future__ import annotations

import logging
import secrets
import threading

from memora.classroom.grace import DEFAULT_SHUTDOWN_GRACE_S, turn_outlives_stop_s
from memora.classroom.store.base import StoreError
from memora.classroom.store.postgres_pool import CONNECT_TIMEOUT_S, PerDatabase, connection_names

log = logging.getLogger(__name__)
PRESENCE_LOCK = 734_522_003
"""The first half of every presence lock, so that they are told apart from Memora's other advisory
locks."""
RESTART_SETTLE_S = turn_outlives_stop_s(DEFAULT_SHUTDOWN_GRACE_S)
"""How long after PostgreSQL starts a holder without its lock is still taken for alive, at the
default grace: a stopping process's shutdown grace and its unwind (``memora.classroom.grace``), the
longest a holder of a reply may live on without a new booking. A store opened with another grace
settles for that grace (``open_store``)."""
WATCH_S = 1.0
"""How often the holding thread looks up from its wait to see whether it is asked to stop."""
RETRY_S = 0.5
"""How soon the holding thread tries again while the database does not answer."""


def holder_alive(booking: str) -> str:
    """A SQL condition, true while the booking aliased ``booking`` (a row with a ``presence``
    column) has a live holder by PostgreSQL's account; it takes one parameter, the seconds of
    ``RESTART_SETTLE_S`` (see the module)."""
    return (
        f"({booking}.presence IS NULL OR EXISTS (SELECT 1 FROM pg_locks l"
        " WHERE l.locktype = 'advisory' AND l.granted"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        f" AND l.classid = {PRESENCE_LOCK}::oid AND l.objid = {booking}.presence::oid"
        " AND l.objsubid = 2)"
        " OR now() - pg_postmaster_start_time() < make_interval(secs => %s))"
    )


class Presence:
    """This process's presence lock on the database at ``url``, held by a thread of its own on a
    connection of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._key: int | None = None
        self._held = threading.Event()
        self._closing = threading.Event()
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self.backend_pid: int | None = None
        """The server process of the holding connection, while it is connected: what a test
        terminates."""

    def __repr__(self) -> str:  # the URL may hold a password
        return f"Presence(key={self._key})"

    def start(self) -> None:
        """Starts taking the lock, in its own thread, without waiting: a store does so at its first
        transaction, so that its first turn's booking finds the lock held already."""
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._hold, name="memora-presence", daemon=True
                )
                self._thread.start()

    def key(self) -> int:
        """The key of this process's lock, once it has held it; waits for the first hold up to the
        connect timeout. Raises StoreError when the database did not answer by then. During a
        reconnection it answers at once."""
        self.start()
        if not self._held.wait(CONNECT_TIMEOUT_S) or self._key is None:
            raise StoreError(
                "PostgreSQL: this process could not take its presence lock; "
                "the server's log says why"
            )
        return self._key

    def close(self) -> None:
        """Gives the lock back and closes its connection (a clean exit; a dead process's is dropped
        by PostgreSQL)."""
        self._closing.set()
        thread = self._thread
        if thread is not None:
            thread.join()

    def _hold(self) -> None:
        import psycopg

        while not self._closing.is_set():
            try:
                with psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    **connection_names(self.url, "presence"),
                ) as connection:
                    self._key = self._take(connection, self._key)
                    self.backend_pid = connection.info.backend_pid
                    self._held.set()
                    while not self._closing.is_set():
                        # Returns after WATCH_S with no traffic; raises at once when the connection
                        # breaks.
                        for _ in connection.notifies(timeout=WATCH_S):
                            pass
                    connection.execute(
                        "SELECT pg_advisory_unlock(%s, %s)", (PRESENCE_LOCK, self._key)
                    )
            except psycopg.Error as error:
                log.info(
                    "Memora: the presence lock's connection failed (%s); taking it again",
                    type(error).__name__,
                )
            self._closing.wait(RETRY_S)

    @staticmethod
    def _take(connection: object, key: int | None) -> int:
        """``key`` again after a reconnection, or a new one: never one another process holds."""
        while True:
            if key is None:
                key = 1 + secrets.randbelow(2**31 - 1)
            if connection.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (PRESENCE_LOCK, key)
            ).fetchone()[0]:  # type: ignore[attr-defined]
                return key
            key = None


PRESENCES = PerDatabase(Presence)
"""This process's presence locks, one per database URL."""


def shared_presence(url: str) -> Presence:
    """This process's one presence on the database at ``url``."""
    return PRESENCES.get(url)
