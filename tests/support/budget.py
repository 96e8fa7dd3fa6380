"""Sessions sending at once against the server budget, isolated PostgreSQL schemas, and real storage faults.

``python -m tests.support.budget LEDGER CAP SESSIONS GO OUT`` is the second process of the concurrency
tests: it opens ``SESSIONS`` sessions on the ledger ``LEDGER`` (``sqlite:<path>`` or a PostgreSQL URL),
waits for the file ``GO`` to exist, sends one turn from each at once, and writes what happened to ``OUT``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memora.classroom.guard import GuardedBackend
from memora.classroom.server_budget import CappedSpend, ServerBudgetReached, ServerLedger
from memora.memory import ShortTermMemory
from tests.support.fakes import ScriptedBackend

OUTAGE_CLUSTER_VARIABLE = "MEMORA_TEST_POSTGRES_OUTAGE_CLUSTER"
OUTAGE_URL_VARIABLE = "MEMORA_TEST_POSTGRES_OUTAGE_URL"
MESSAGE = "Please check my sentence: I goes to school every days."
REPLY_CAP = 60
GO_WAIT_S = 60.0
"""How long a session waits for the start signal: a bound on a hang, not a measure of speed."""


def ledger_for(spec: str, cap: int) -> CappedSpend:
    """``sqlite:<path>`` or a PostgreSQL URL, as a ledger capped at ``cap``."""
    if spec.startswith("sqlite:"):
        return ServerLedger(Path(spec.removeprefix("sqlite:")), cap)
    from memora.classroom.postgres_ledger import PostgresServerLedger

    return PostgresServerLedger(spec, cap)


@dataclass
class Outcomes:
    """What a crowd of sessions did: replies committed, refusals by the budget, anything else, and the fakes' bills."""

    sent: int = 0
    refused: int = 0
    failed: list[str] = field(default_factory=list)
    billed: int = 0


def send_at_once(ledger: CappedSpend, sessions: int, start: threading.Barrier | Path) -> Outcomes:
    """One turn from each of ``sessions`` sessions (own memory, own backend, one shared ledger), all released together.

    ``start`` is a barrier shared with other threads, or a file whose appearance releases them (another process's).
    """
    backends = [ScriptedBackend() for _ in range(sessions)]
    memories = [
        ShortTermMemory(GuardedBackend(backend, server_ledger=ledger), model="gpt-4.1-mini", max_reply_tokens=REPLY_CAP)
        for backend in backends
    ]
    outcomes, lock = Outcomes(), threading.Lock()
    gate = threading.Barrier(sessions) if isinstance(start, Path) else start

    def session(memory: ShortTermMemory) -> None:
        if isinstance(start, Path):
            deadline = time.monotonic() + GO_WAIT_S
            while not start.exists() and time.monotonic() < deadline:
                time.sleep(0.001)
        gate.wait()
        try:
            with memory.turn(MESSAGE) as turn:
                turn.run()
            with lock:
                outcomes.sent += 1
        except ServerBudgetReached:
            with lock:
                outcomes.refused += 1
        except Exception as error:  # reported, so that the test names it
            with lock:
                outcomes.failed.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=session, args=(memory,)) for memory in memories]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes.billed = sum(tokens for backend in backends for _, tokens in backend.billed)
    return outcomes


@contextmanager
def second_process(spec: str, cap: int, sessions: int, go: Path, out: Path) -> Iterator[subprocess.Popen]:
    """This module run as another process; yields once it started, and waits for it on leaving."""
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-m", "tests.support.budget", spec, str(cap), str(sessions), str(go), str(out)], cwd=root)
    try:
        yield process
    finally:
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def isolated_postgres_url(url: str) -> str:
    """``url`` with its own new schema first on the search path: the ledger's table there starts empty,
    and nothing of the shared test database (which other suites use at the same time) is touched."""
    import psycopg

    schema = "budget_" + secrets.token_hex(6)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def require_root(what: str) -> None:
    """Skips (fails under CI) unless this process is root, which mounting a tmpfs needs."""
    if os.geteuid() != 0:
        reason = f"{what} needs root (mount -t tmpfs); CI runs as root"
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)


@contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path``, unmounted on leaving."""
    require_root("a full or read-only data folder")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """Writes a file into ``folder`` until its file system is full; returns it (delete it to free the space)."""
    filler = folder / "filler.bin"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    try:
        # The last partial block: what a page of SQLite would need.
        with open(filler, "ab") as out:
            while True:
                out.write(b"\0" * 512)
                out.flush()
    except OSError:
        pass
    return filler


def remount(path: Path, mode: str) -> None:
    """``mode`` is ``ro`` or ``rw``."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


def outage_cluster() -> tuple[str, str]:
    """The PostgreSQL cluster the outage tests may stop (``15/outage``) and its URL; skips (fails under CI) without them."""
    cluster, url = os.environ.get(OUTAGE_CLUSTER_VARIABLE), os.environ.get(OUTAGE_URL_VARIABLE)
    if not (cluster and url):
        reason = (
            f"the PostgreSQL outage tests need {OUTAGE_CLUSTER_VARIABLE} and {OUTAGE_URL_VARIABLE}: a cluster of their own, "
            "which they stop and start (.ci/run creates it; never the shared one)"
        )
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)
    return cluster, url


def pg_ctlcluster(cluster: str, action: str) -> None:
    """``pg_ctlcluster 15 outage stop|start``; stop is ``fast``: sessions are cut as a crash or a restart would."""
    version, name = cluster.split("/")
    extra = ["-m", "fast"] if action == "stop" else []
    subprocess.run(["pg_ctlcluster", *extra, version, name, action], check=True)


def main(argv: list[str]) -> None:
    spec, cap, sessions, go, out = argv
    outcomes = send_at_once(ledger_for(spec, int(cap)), int(sessions), Path(go))
    Path(out).write_text(json.dumps(outcomes.__dict__))


if __name__ == "__main__":
    main(sys.argv[1:])
