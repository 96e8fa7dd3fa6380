"""One command for a class too big for one process: N ``streamlit run`` processes and Caddy in front of them.

``python -m memora.serve --processes 2`` checks what a big class needs before it starts anything: Caddy on the
PATH (Debian: ``apt-get install caddy``) and ``MEMORA_STORE_URL`` naming a PostgreSQL database, which every
process shares (conversations, room for turns, deletions and the server budget). Without either it exits with 2
and says what to do. Then it starts the processes on 127.0.0.1 (ports from ``--first-port``) and Caddy with the
repository's ``Caddyfile`` (sticky cookie, health checks on ``/_stcore/health``, retries and passive failure
marking), listening on ``--listen``. Each process runs the page once (``memora.app.first_run``) before the class is
announced as ready.

It keeps them running:

- A Streamlit process that exits (crashed, or stopped by hand) is started again on its port, while Caddy sends its
  students to the others.
- SIGHUP (``kill -HUP <pid>``, the pid it prints) restarts the processes one at a time, for new code or new
  settings, with no student waiting on a cold process: each successor starts on the *spare* port (the one after
  the last process; Caddy knows it, and its health check keeps it out of the pool while nothing listens there),
  runs the page once, and only then is the old process stopped, whose students Caddy spreads over the live ones.
  The old process's port is the next spare. A successor whose page fails (bad settings, say) is stopped, the
  restart ends there, and the class stays on the processes it had. A restart also evens out a class that a crash
  moved onto fewer processes, since Caddy pins a moved student to a live process at random.
- Ctrl-C or SIGTERM stops Caddy and every process (each gets its own shutdown grace, ``MEMORA_SHUTDOWN_GRACE_S``)
  and exits 0; Caddy exiting on its own stops the rest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memora.app.first_run import FirstRunFailed, run_page_once
from memora.classroom.store import is_postgres

ROOT = Path(__file__).resolve().parents[2]
CADDYFILE = ROOT / "Caddyfile"
APP = ROOT / "streamlit_app.py"
RESTART_DELAY_S = 1.0
"""How long a process that exited waits before it is started again: a crash loop costs a second, not a core."""
STOP_WAIT_S = 30.0
"""How long a stop waits for the processes: above the shutdown grace, so a reply in progress can be saved."""
LISTEN_WAIT_S = 60.0
"""How long a new process may take to listen on its port before the restart that started it gives up on it."""


class ServeError(RuntimeError):
    """Something a big class needs is missing; the message says what to do."""


@dataclass(frozen=True)
class Plan:
    """What to start: Streamlit servers on ``ports``, a ``spare`` port for a rolling restart's successors, and Caddy
    (``caddy``) on ``listen``."""

    caddy: str
    ports: tuple[int, ...]
    spare: int
    listen: str

    @property
    def upstreams(self) -> str:
        """Every port Caddy may send a student to: the processes' and the spare, which its health check keeps out
        of the pool while nothing listens there."""
        return " ".join(f"127.0.0.1:{port}" for port in (*self.ports, self.spare))


def plan(argv: Sequence[str], environ: dict[str, str]) -> Plan:
    """The command line and the environment, checked; raises ServeError naming what is missing."""
    parser = argparse.ArgumentParser(prog="python -m memora.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="Streamlit processes to run (default 2)")
    parser.add_argument("--first-port", type=int, default=8501, help="the first process's port; the others follow, then the spare")
    parser.add_argument("--listen", default=":8080", help="where Caddy listens for students (default :8080)")
    args = parser.parse_args(argv)
    if not 1 <= args.processes <= 64:
        raise ServeError("--processes must be between 1 and 64.")
    if not is_postgres(environ.get("MEMORA_STORE_URL", "").strip()):
        # The value may hold a password: the message never quotes it.
        raise ServeError(
            "MEMORA_STORE_URL must name a PostgreSQL database that every process shares "
            "(postgresql://user:password@host:5432/db): with a SQLite file or none, each process would keep "
            "conversations, room for turns and deletions of its own. See docs/postgresql.md to create one."
        )
    caddy = shutil.which("caddy", path=environ.get("PATH"))
    if caddy is None:
        raise ServeError(
            "Caddy is not installed (no `caddy` on the PATH). On Debian or Ubuntu: sudo apt-get install caddy; "
            "elsewhere see https://caddyserver.com/docs/install. Then run this command again."
        )
    ports = tuple(range(args.first_port, args.first_port + args.processes))
    return Plan(caddy, ports, args.first_port + args.processes, args.listen)


def streamlit_command(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
    ]


class Class:
    """The running processes and Caddy: started, restarted when a process exits or on SIGHUP, and stopped together."""

    def __init__(self, chosen: Plan, environ: dict[str, str]) -> None:
        self.plan, self.environ = chosen, environ
        self.processes: dict[int, subprocess.Popen] = {}
        """The processes students are sent to, by port."""
        self.spare = chosen.spare
        self.leaving: list[subprocess.Popen] = []
        """Processes that are not the class's (stopped by a rolling restart, or a successor that failed), until
        they have exited: a stop signals them too."""
        self.caddy: subprocess.Popen | None = None
        self.stopping = False
        self.restart_asked = False

    def start(self) -> None:
        for port in self.plan.ports:
            self._start_process(port)
        # http://: without a scheme Caddy would serve a host address over HTTPS, with a certificate of its own.
        environ = {**self.environ, "MEMORA_UPSTREAMS": self.plan.upstreams, "MEMORA_LISTEN": "http://" + self.plan.listen}
        command = [self.plan.caddy, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"]
        self.caddy = subprocess.Popen(command, env=environ)
        _say(f"Caddy (pid {self.caddy.pid}) on {self.plan.listen}, in front of {self.plan.upstreams}")
        for port in self.plan.ports:
            self._first_run(port)
        _say(f"ready; kill -HUP {os.getpid()} restarts the processes one at a time, each successor on the spare port first")

    def watch(self) -> int:
        """Restarts processes that exit, and all of them on SIGHUP, until a stop or until Caddy exits; returns the
        exit status."""
        assert self.caddy is not None
        while not self.stopping:
            if (code := self.caddy.poll()) is not None:
                _say(f"Caddy exited with {code}; stopping the processes")
                self.stop()
                return code or 1
            self._start_exited()
            if self.restart_asked:
                self.restart_asked = False
                self.roll()
            time.sleep(0.2)
        return 0

    def ask_restart(self, *_: object) -> None:
        """SIGHUP: a rolling restart, started by ``watch`` (a signal handler only sets the flag)."""
        self.restart_asked = True

    def roll(self) -> None:
        """Restarts every process in turn: its successor starts on the spare port and runs the page once, then the
        process is stopped (its students go to the live ones) and, once it has exited, its port is the next spare.
        A successor that does not run the page cleanly is stopped, and the restart ends there."""
        ports = sorted(self.processes)
        _say(f"rolling restart of {len(ports)} process(es)")
        for old_port in ports:
            if self.stopping:
                return
            successor = self.spare
            self._start_process(successor)
            if not self._first_run(successor):
                self._retire(successor, self.processes.pop(successor))
                _say(f"rolling restart stopped; the class stays on ports {' '.join(map(str, sorted(self.processes)))}")
                return
            self._retire(old_port, self.processes.pop(old_port))
            self.spare = old_port
        _say(f"rolling restart done; the class is on ports {' '.join(map(str, sorted(self.processes)))}")

    def stop(self, *_: object) -> None:
        """SIGTERM to Caddy and every process, then waits for them (SIGKILL past ``STOP_WAIT_S``)."""
        self.stopping = True
        everyone = (*self.processes.values(), *self.leaving, self.caddy)
        children = [p for p in everyone if p is not None and p.poll() is None]
        for child in children:
            child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _start_exited(self) -> None:
        for port, process in list(self.processes.items()):
            if process.poll() is not None and not self.stopping:
                _say(f"the process on port {port} (pid {process.pid}) exited with {process.returncode}; starting it again")
                time.sleep(RESTART_DELAY_S)
                self._start_process(port)
                self._first_run(port)

    def _start_process(self, port: int) -> None:
        self.processes[port] = process = subprocess.Popen(streamlit_command(port), env=self.environ, stdin=subprocess.DEVNULL)
        _say(f"process on 127.0.0.1:{port} (pid {process.pid})")

    def _first_run(self, port: int) -> bool:
        """Waits until the process on ``port`` listens, then runs its page once (``run_page_once``); says how it went."""
        process = self.processes[port]
        deadline = time.monotonic() + LISTEN_WAIT_S
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline or self.stopping:
                _say(f"the process on port {port} (pid {process.pid}) did not start listening")
                return False
            time.sleep(0.1)
        try:
            seconds = run_page_once(port)
        except FirstRunFailed as failure:
            _say(f"the process on port {port} (pid {process.pid}) failed its first run: {failure}")
            return False
        _say(f"the process on port {port} (pid {process.pid}) ran the page in {seconds:.1f} s")
        return True

    def _retire(self, port: int, process: subprocess.Popen) -> None:
        """Stops ``process`` (SIGTERM: it saves what its students were doing, within its grace) and waits until it
        has exited, so that its port is free; SIGKILL past ``STOP_WAIT_S``."""
        self.leaving.append(process)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.leaving.remove(process)
        _say(f"the process on port {port} (pid {process.pid}) stopped with {process.returncode}")


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _say(line: str) -> None:
    print(f"memora.serve: {line}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    environ = dict(os.environ)
    try:
        chosen = plan(sys.argv[1:] if argv is None else argv, environ)
    except ServeError as error:
        print(f"memora.serve: {error}", file=sys.stderr)
        return 2
    running = Class(chosen, environ)
    signal.signal(signal.SIGTERM, running.stop)
    signal.signal(signal.SIGINT, running.stop)
    signal.signal(signal.SIGHUP, running.ask_restart)
    running.start()
    code = running.watch()
    running.stop()
    return code
