"""This process's connections to a PostgreSQL database: one bounded pool per URL, owned by the
process.

Every conversation store and server ledger of one process on one database borrows its connections
from the same ``psycopg_pool.ConnectionPool`` (``shared_pool``), which never holds more than
``POOL_SIZE``. The pool lives in this module, not in ``st.cache_resource``: a ``clear_cache``
message, which any browser may send, empties that cache, and the store a later session makes finds
the same pool here, so no message raises the number of connections.

Edge cases:

- Nothing is opened until the first transaction. That one, and the first after a connection was
  found broken, first connects on its own (``_probe``): a refused or malformed URL fails at once,
  with libpq's text redacted, rather than after the pool's wait, and the pool's connections are only
  ever made to a database that answered. Between them the process holds the pool's connections and
  that one probe, at most.
- A connection found broken (a database restart, an idle drop) makes the next transaction probe the
  database: when it answers, a new pool replaces the old one, whose connections were opened before
  the restart, and the work runs once more (its transaction never committed, so nothing runs twice);
  when it does not, every transaction fails at once, without waiting for the pool, until it does.
- The tables a part needs (``schema``) are made once per process and pool, under an advisory lock,
  so two processes starting together do not race in PostgreSQL's catalog.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from memora.classroom.store.base import StoreError, StoreUnreachable

log = logging.getLogger(__name__)
T = TypeVar("T")
POOL_SIZE = 4
"""Connections one process holds at most for its stores and ledgers on one database: each
transaction is a few short statements, so four let a slow one (waiting for an advisory lock another
process holds) block nobody else."""
POOL_WAIT_S = 10.0
"""How long a transaction waits for one of the pool's connections; a longer wait means the database
is not answering."""
CONNECT_TIMEOUT_S = 5
SCHEMA_LOCK = 734_522_001
"""An advisory lock id: two processes creating the tables at once would otherwise race in
PostgreSQL's catalog."""


class PostgresPool:
    """The pool of one database URL, with the probe and the tables described in the module's
    docstring."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._pool: Any = None
        self._down = False
        self._schemas: set[str] = set()

    def __repr__(self) -> str:  # the URL may hold a password
        return f"PostgresPool({self.place!r})"

    @functools.cached_property
    def place(self) -> str:
        """Host, port and database: names the database in logs and keys, never its credentials."""
        from memora.backends.redaction import redact, url_secrets

        netloc = self.url.partition("://")[2].rpartition("@")[2].partition("/")[0]
        database = self.url.rpartition("/")[2].partition("?")[0]
        return redact(f"postgresql://{netloc}/{database}", url_secrets(self.url))

    def run(self, work: Callable[[Any], T], schema: str = "") -> T:
        """``work(connection)`` inside one transaction on one of the pool's connections, once
        ``schema``'s tables exist; psycopg's and the pool's errors become StoreError
        (StoreUnreachable when the server was not reached, cut the connection or is starting),
        whose text names no host, role or password."""
        import psycopg

        for attempt in (1, 2):
            broken = False
            try:
                pool = self._ready(schema)
                with pool.connection() as connection:
                    try:
                        with connection.transaction():
                            return work(connection)
                    except psycopg.Error:
                        broken = (
                            connection.broken
                        )  # read before the pool discards it: closed, it no longer says
                        raise
            except psycopg.Error as error:
                if broken:
                    with self._lock:
                        # The next transaction probes the database and makes a new pool.
                        self._down = True
                if attempt == 1 and broken:
                    continue
                # libpq's text names the host, port, role and database: the teacher's log only,
                # never a page.
                log.warning(
                    "Memora: PostgreSQL at %s (role %s) failed: %s",
                    self.place,
                    self._role,
                    self._safe(error),
                )
                # OperationalError: the server was not reached, cut us off or is starting (the
                # pool's timeout too).
                unreachable = isinstance(error, psycopg.OperationalError)
                raise (StoreUnreachable if unreachable else StoreError)(
                    f"PostgreSQL: {_reason(error)}; the server's log says where and why"
                ) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Closes the pool; a later ``run`` opens a new one."""
        with self._lock:
            pool = self._pool
            self._pool = None
            self._schemas = set()
        if pool is not None:
            pool.close()

    def _ready(self, schema: str) -> Any:
        with self._lock:
            if self._pool is None or self._down:
                self._probe()
                stale = self._pool
                self._pool = self._open()
                self._down = False
                if stale is not None:
                    # Its connections date from before the break; one still lent is closed
                    # when it comes back.
                    stale.close()
            if schema and schema not in self._schemas:
                with self._pool.connection() as connection, connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                    for statement in schema.split(";"):
                        connection.execute(statement)
                self._schemas.add(schema)
            return self._pool

    def _probe(self) -> None:
        import psycopg

        psycopg.connect(
            self.url, connect_timeout=CONNECT_TIMEOUT_S, **connection_names(self.url, "probe")
        ).close()

    def _open(self) -> Any:
        from psycopg_pool import ConnectionPool

        kwargs = {
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT_S,
            **connection_names(self.url, "pool"),
        }
        return ConnectionPool(
            self.url,
            kwargs=kwargs,
            min_size=1,
            max_size=POOL_SIZE,
            timeout=POOL_WAIT_S,
            name=f"memora {self.place}",
            open=True,
        )

    @functools.cached_property
    def _role(self) -> str:
        from urllib.parse import unquote

        userinfo = self.url.partition("://")[2].rpartition("@")[0]
        return unquote(userinfo.partition(":")[0]) or "(libpq's default)"

    def _safe(self, error: Exception) -> str:
        # libpq's own messages may quote the URL or its password (a malformed one, say): redacted in
        # any form.
        from memora.backends.redaction import redact, url_secrets

        return redact(f"{type(error).__name__}: {error}".strip(), url_secrets(self.url))


def connection_names(url: str, part: str) -> dict[str, str]:
    """``application_name`` for a connection of this process (``memora <pid> <part>``), so that
    ``pg_stat_activity`` tells the teacher which process holds which connection; nothing when the
    URL names one itself."""
    return {} if "application_name" in url else {"application_name": f"memora {os.getpid()} {part}"}


def _reason(error: Exception) -> str:
    """What a student may read of a psycopg error: its class and SQLSTATE (``28P01``: the password
    was refused; none: the server could not be reached), never libpq's own text."""
    code = getattr(error, "sqlstate", None)
    return f"{type(error).__name__}, SQLSTATE {code}" if code else type(error).__name__


class PostgresTables:
    """The tables one part of Memora keeps (``schema``: a store's, a ledger's) on this process's
    pool for ``url``.

    It looks the pool up on every transaction, so one made again (after ``POOLS.close_all``) serves
    it too."""

    def __init__(self, url: str, schema: str) -> None:
        self.url = url
        self.schema = schema

    def __repr__(self) -> str:  # the URL may hold a password
        return f"PostgresTables({self.place!r})"

    @property
    def place(self) -> str:
        return shared_pool(self.url).place

    def run(self, work: Callable[[Any], T]) -> T:
        """``PostgresPool.run`` with these tables."""
        return shared_pool(self.url).run(work, self.schema)

    def close(self) -> None:
        """Closes the process's pool for ``url`` (every part on it shares it); the next transaction
        opens it again."""
        shared_pool(self.url).close()


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class PerDatabase(Generic[C]):
    """One ``make(url)`` per database URL for this whole process, made on first use, outside
    ``st.cache_resource`` (which any browser may empty): the pools here, the presence locks
    (``presence``)."""

    def __init__(self, make: Callable[[str], C]) -> None:
        self._make = make
        self._made: dict[str, C] = {}
        self._lock = threading.Lock()

    def get(self, url: str) -> C:
        with self._lock:
            if url not in self._made:
                self._made[url] = self._make(url)
            return self._made[url]

    def close_all(self) -> None:
        """Closes every one (a test's end); the next ``get`` of a URL makes it again."""
        with self._lock:
            made = list(self._made.values())
            self._made.clear()
        for each in made:
            each.close()


POOLS = PerDatabase(PostgresPool)
"""This process's pools, one per database URL."""


def shared_pool(url: str) -> PostgresPool:
    """This process's one pool for ``url``: every store and ledger on that database shares it."""
    return POOLS.get(url)
