"""One command for a class too big for one process: N ``streamlit run`` processes behind Caddy.

``python -m memora.serve --processes 2`` checks what a big class needs before it starts anything:
Caddy on the PATH (Debian: ``apt-get install caddy``) and ``MEMORA_STORE_URL`` naming a PostgreSQL
database, which every process shares (conversations, room for turns, deletions and the server
budget). Without either it exits with 2 and says what to do. Then it starts the processes on
127.0.0.1 (ports from ``--first-port``) and Caddy with the repository's ``Caddyfile`` (sticky
cookie, health checks on ``/_stcore/health``, retries and passive failure marking), listening on
``--listen``. Each process runs the page once (``memora.app.first_run``) before the class is
announced as ready.

It keeps them running:

- A Streamlit process that exits (crashed, or stopped by hand) is started again on its port, while
  Caddy sends its students to the others: after 1 s, and after twice the last wait (up to 30 s) when
  it exits again within a minute of its start (``restart_delay``), so that a process that cannot
  start (its port taken by another program, a broken setting) costs a start every 30 s, not one a
  second. The command goes on meanwhile: a stop or a SIGHUP asked during a wait is acted on at once.
- SIGHUP (``kill -HUP <pid>``, the pid it prints) restarts the processes one at a time, for new code
  or new settings, with no student waiting on a cold process: each successor starts on the *spare*
  port (the one after the last process; Caddy knows it, and its health check keeps it out of the
  pool while nothing listens there), runs the page once, and only then is the old process stopped,
  whose students Caddy spreads over the live ones. The old process's port is the next spare. A
  successor whose page fails (bad settings, say) is stopped, the restart ends there, and the class
  stays on the processes it had. A restart also evens out a class that a crash moved onto fewer
  processes, since Caddy pins a moved student to a live process at random.
- Ctrl-C or SIGTERM stops Caddy and every process and exits 0; Caddy exiting on its own stops the
  rest. Each process gets its own shutdown grace (``MEMORA_SHUTDOWN_GRACE_S``, read before it was
  started, as its page reads it: ``memora.app.served_grace``), and is killed only past
  ``exit_within_s`` of that grace (``memora.classroom.grace``): the grace, the unwind and a margin.
  A second Ctrl-C or SIGTERM is passed on, and the processes stop waiting for their replies. A
  signal only sets a flag; the main loop acts on it.

It leaves nothing behind, and trusts no process it did not start:

- Before anything starts, every port it needs (the processes', the spare, Caddy's ``--listen``) must
  be free; otherwise it exits with 2, naming each port and what holds it (``memora.app.ports``).
- Each child dies with it (SIGTERM from the kernel when it dies, even by SIGKILL) and has a session
  of its own, out of reach of the terminal's SIGHUP and Ctrl-C (``memora.app.children``).
- A process is ready once it holds its own listening socket (its pid, by /proc) and has run the
  page; whoever else answers on its port does not count. The class is announced ready only when all
  of them are; otherwise it stops what it started and exits with 1.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memora.app import ports
from memora.app.children import spawn
from memora.app.first_run import FirstRunFailed, run_page_once
from memora.app.served_grace import grace_of_next_process
from memora.classroom.grace import exit_within_s
from memora.classroom.store import is_postgres

ROOT = Path(__file__).resolve().parents[2]
CADDYFILE = ROOT / "Caddyfile"
APP = ROOT / "streamlit_app.py"
RESTART_DELAY_S = 1.0
"""How long a process that exited waits before it is started again the first time: a crash costs a
second, not a core."""
RESTART_DELAY_MAX_S = 30.0
"""The longest wait before a process that keeps exiting is started again (``restart_delay``)."""
STEADY_S = 60.0
"""How long a process must have run for its exit to count as a first one again (a wait of
``RESTART_DELAY_S``)."""
LISTEN_WAIT_S = 60.0
"""How long a new process may take to listen on its port before the start or restart that started it
gives up on it."""
POLL_S = 0.1


def restart_delay(last_s: float | None, up_s: float) -> float:
    """How long to wait before starting again a process that exited after ``up_s`` seconds, on a
    port whose last wait was ``last_s`` (None: its process never exited before). Edge cases: a first
    exit, or one after ``STEADY_S`` or more up (it had been working: a crash, or a stop by hand),
    waits ``RESTART_DELAY_S``; an exit sooner than that waits twice ``last_s``, up to
    ``RESTART_DELAY_MAX_S``, so a process that never starts waits 1, 2, 4, 8, 16, 30, 30 ... s, and
    a class that cannot serve a port says so every 30 s rather than every second."""
    if last_s is None or up_s >= STEADY_S:
        return RESTART_DELAY_S
    return min(2 * last_s, RESTART_DELAY_MAX_S)


class ServeError(RuntimeError):
    """Something a big class needs is missing; the message says what to do."""


@dataclass(frozen=True)
class ClassSetup:
    """What to start: Streamlit servers on ``ports``, a ``spare`` port for a rolling restart's
    successors, and Caddy (``caddy``) on ``listen`` (``[host]:port``; no host is every address)."""

    caddy: str
    ports: tuple[int, ...]
    spare: int
    listen: str

    @property
    def upstreams(self) -> str:
        """Every port Caddy may send a student to: the processes' and the spare, which its health
        check keeps out of the pool while nothing listens there."""
        return " ".join(f"127.0.0.1:{port}" for port in (*self.ports, self.spare))

    @property
    def listen_host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def listen_port(self) -> int:
        return int(self.listen.rpartition(":")[2])


def checked_setup(argv: Sequence[str], environ: dict[str, str]) -> ClassSetup:
    """The command line and the environment, checked; raises ServeError naming what is missing."""
    parser = argparse.ArgumentParser(
        prog="python -m memora.serve", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--processes", type=int, default=2, help="Streamlit processes to run (default 2)"
    )
    parser.add_argument(
        "--first-port",
        type=int,
        default=8501,
        help="the first process's port; the others follow, then the spare",
    )
    parser.add_argument(
        "--listen", default=":8080", help="where Caddy listens for students (default :8080)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.processes <= 64:
        raise ServeError("--processes must be between 1 and 64.")
    if not 1 <= args.first_port <= 65535 - args.processes:
        raise ServeError(
            f"--first-port must leave room for {args.processes} process(es) and the spare port "
            "below 65536."
        )
    port = args.listen.rpartition(":")[2]
    if ":" not in args.listen or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ServeError(
            f"--listen must be [host]:port, such as :8080 or 127.0.0.1:8080, not {args.listen!r}."
        )
    if not is_postgres(environ.get("MEMORA_STORE_URL", "").strip()):
        # The value may hold a password: the message never quotes it.
        raise ServeError(
            "MEMORA_STORE_URL must name a PostgreSQL database that every process shares "
            "(postgresql://user:password@host:5432/db): with a SQLite file or none, each process "
            "would keep conversations, room for turns and deletions of its own. See "
            "docs/postgresql.md to create one."
        )
    caddy = shutil.which("caddy", path=environ.get("PATH"))
    if caddy is None:
        raise ServeError(
            "Caddy is not installed (no `caddy` on the PATH). On Debian or Ubuntu: sudo apt-get "
            "install caddy; elsewhere see https://caddyserver.com/docs/install. Then run this "
            "command again."
        )
    ports = tuple(range(args.first_port, args.first_port + args.processes))
    return ClassSetup(caddy, ports, args.first_port + args.processes, args.listen)


def taken_ports(setup: ClassSetup) -> list[str]:
    """One line for each port of ``setup`` that something holds now, naming the port, what it is for
    and, where /proc tells, the process holding it; empty when every port is free."""
    wanted = [
        ("127.0.0.1", port, f"process {number}") for number, port in enumerate(setup.ports, 1)
    ]
    wanted.append(("127.0.0.1", setup.spare, "the spare, for a rolling restart"))
    wanted.append((setup.listen_host, setup.listen_port, "Caddy's --listen"))
    return [
        f"port {port} ({what}) is taken{_holders(port)}."
        for host, port, what in wanted
        if ports.taken(host, port)
    ]


def _holders(port: int) -> str:
    found = ports.holders(port)
    if not found:
        return ""
    return " by " + ", ".join(f"pid {pid} ({name})" for pid, name in found)


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


@dataclass(frozen=True)
class Child:
    """A process this command started, how long it may take to exit once stopped
    (``exit_within_s`` of the grace it was started with) before it is killed, and when it was
    started (``Supervisor.clock``), which tells how long it ran."""

    process: subprocess.Popen
    exit_within_s: float
    started_at: float = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid


class Supervisor:
    """The running processes and Caddy: started, restarted when a process exits or on SIGHUP, and
    stopped together.

    The signal handlers (``ask_stop``, ``ask_restart``) only set flags; ``watch``, the main loop,
    acts on them, and so do the waits of a start or a rolling restart, which give up when a stop is
    asked."""

    def __init__(
        self,
        setup: ClassSetup,
        environ: dict[str, str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.setup = setup
        self.environ = environ
        self.clock = clock
        self.processes: dict[int, Child] = {}
        """The processes students are sent to, by port."""
        self.spare = setup.spare
        self.leaving: list[Child] = []
        """Processes that are not the class's (stopped by a rolling restart, or a successor that
        failed), until they have exited: a stop waits for them too."""
        self.caddy: Child | None = None
        self.stop_signals = 0
        """SIGTERMs and SIGINTs received: the first asks for a stop, each later one is passed on to
        the processes."""
        self.restart_asked = False
        self.deadlines: dict[int, float] = {}
        """By pid: when a child sent SIGTERM must have exited, past which it is killed."""
        self.waits: dict[int, float] = {}
        """By port: the last wait before its exited process was started again
        (``restart_delay``)."""
        self.due: dict[int, float] = {}
        """By port: when its exited process is to be started again (``clock``'s time)."""

    @property
    def stopping(self) -> bool:
        return self.stop_signals > 0

    def ask_stop(self, *_: object) -> None:
        """SIGTERM or SIGINT: a stop, carried out by ``watch`` and ``stop``."""
        self.stop_signals += 1

    def ask_restart(self, *_: object) -> None:
        """SIGHUP: a rolling restart, started by ``watch``."""
        self.restart_asked = True

    def start(self) -> bool:
        """Starts the processes and Caddy and waits until each is ready; says "ready" and returns
        True only when all are, else says which was not and returns False (the caller stops the
        class)."""
        for port in self.setup.ports:
            self._start_process(port)
        # http://: without a scheme Caddy would serve a host address over HTTPS, with a certificate
        # of its own.
        environ = {
            **self.environ,
            "MEMORA_UPSTREAMS": self.setup.upstreams,
            "MEMORA_LISTEN": "http://" + self.setup.listen,
        }
        command = [self.setup.caddy, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"]
        self.caddy = Child(
            spawn(command, environ), max(child.exit_within_s for child in self.processes.values())
        )
        _say(
            f"Caddy (pid {self.caddy.pid}) on {self.setup.listen}, in front of "
            f"{self.setup.upstreams}"
        )
        if not self._listening(self.caddy, self.setup.listen_port, f"Caddy (pid {self.caddy.pid})"):
            return False
        if not all(self._first_run(port) for port in self.setup.ports):
            return False
        _say(
            f"ready; kill -HUP {os.getpid()} restarts the processes one at a time, each successor "
            "on the spare port first"
        )
        return True

    def watch(self) -> int:
        """Restarts processes that exit, and all of them on SIGHUP, until a stop is asked or Caddy
        exits; returns the exit status. The caller then stops the class."""
        assert self.caddy is not None
        while not self.stopping:
            if (code := self.caddy.process.poll()) is not None:
                _say(f"Caddy exited with {code}; stopping the processes")
                return code or 1
            self._start_exited()
            if self.restart_asked:
                self.restart_asked = False
                self.roll()
            time.sleep(POLL_S)
        return 0

    def roll(self) -> None:
        """Restarts every process in turn: its successor starts on the spare port and runs the page
        once, then the process is stopped (its students go to the live ones) and, once it has
        exited, its port is the next spare. A successor that does not run the page cleanly is
        stopped, and the restart ends there; so does a stop."""
        ports = sorted(self.processes)
        _say(f"rolling restart of {len(ports)} process(es)")
        for old_port in ports:
            if self.stopping:
                return
            successor = self.spare
            self._start_process(successor)
            if not self._first_run(successor):
                self._retire(successor, self.processes.pop(successor))
                _say(
                    "rolling restart stopped; the class stays on ports "
                    f"{' '.join(map(str, sorted(self.processes)))}"
                )
                return
            if not self._retire(old_port, self.processes.pop(old_port)):
                return
            self.spare = old_port
            # Its next process is a successor: its exits count afresh.
            self.waits.pop(old_port, None)
        _say(
            "rolling restart done; the class is on ports "
            f"{' '.join(map(str, sorted(self.processes)))}"
        )

    def stop(self) -> None:
        """SIGTERM to Caddy and every process not yet sent one, then waits until all have exited,
        killing each past its own deadline (``exit_within_s`` of its grace). A SIGTERM or SIGINT
        received meanwhile is passed on to those still running, which then stop waiting for their
        replies (``memora.classroom.shutdown``)."""
        everyone = [
            child
            for child in (*self.processes.values(), *self.leaving, self.caddy)
            if child is not None
        ]
        for child in everyone:
            self._terminate(child)
        passed_on = 1  # the first signal is the stop itself
        while running := [child for child in everyone if child.process.poll() is None]:
            if self.stop_signals > passed_on:
                passed_on = self.stop_signals
                _say("asked again: the processes stop waiting for their replies")
                for child in running:
                    child.process.send_signal(signal.SIGTERM)
            for child in running:
                if time.monotonic() > self.deadlines[child.pid]:
                    _say(
                        f"pid {child.pid} did not exit within {child.exit_within_s:.0f} s of its "
                        "stop; killing it"
                    )
                    child.process.kill()
                    self.deadlines[child.pid] = float("inf")
            time.sleep(POLL_S)

    def _terminate(self, child: Child) -> None:
        """SIGTERM to ``child``, once: a second one would cut its shutdown grace short."""
        if child.pid not in self.deadlines and child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
            self.deadlines[child.pid] = time.monotonic() + child.exit_within_s

    def _start_exited(self) -> None:
        """Starts again each process that exited, once its wait (``restart_delay``) is over. It
        never sleeps: the main loop goes on, so a stop or a SIGHUP asked during a 30 s wait is acted
        on at once."""
        now = self.clock()
        for port, child in list(self.processes.items()):
            if self.stopping or child.process.poll() is None:
                continue
            if port not in self.due:
                wait = restart_delay(self.waits.get(port), now - child.started_at)
                self.waits[port] = wait
                self.due[port] = now + wait
                _say(
                    f"the process on port {port} (pid {child.pid}) exited with "
                    f"{child.process.returncode}; starting it again in {wait:g} s"
                )
            elif now >= self.due[port]:
                self._start_process(port)
                self._first_run(port)

    def _start_process(self, port: int) -> None:
        grace_s = grace_of_next_process(self.environ)
        process = spawn(streamlit_command(port), self.environ, stdin=subprocess.DEVNULL)
        self.processes[port] = Child(process, exit_within_s(grace_s), self.clock())
        self.due.pop(port, None)  # a start, whoever asked for it, ends the wait on this port
        _say(f"process on 127.0.0.1:{port} (pid {process.pid})")

    def _first_run(self, port: int) -> bool:
        """Waits until the process on ``port`` itself listens there, then runs its page once
        (``run_page_once``); says how it went."""
        child = self.processes[port]
        where = _where(port, child)
        if not self._listening(child, port, where):
            return False
        try:
            seconds = run_page_once(port)
        except FirstRunFailed as failure:
            _say(f"{where} failed its first run: {failure}")
            return False
        if child.process.poll() is not None or ports.listens(child.pid, port) is False:
            _say(f"{where} exited during its first run")
            return False
        _say(f"{where} ran the page in {seconds:.1f} s")
        return True

    def _listening(self, child: Child, port: int, who: str) -> bool:
        """Waits until ``child`` holds a socket listening on ``port`` (where /proc cannot say: until
        something answers there while it runs); False when it exits first, takes past
        ``LISTEN_WAIT_S``, or a stop is asked."""
        deadline = time.monotonic() + LISTEN_WAIT_S
        while not _listens(child, port):
            if child.process.poll() is not None or time.monotonic() > deadline or self.stopping:
                _say(f"{who} did not start listening on port {port}{_held_by_another(port, child)}")
                return False
            time.sleep(POLL_S)
        return True

    def _retire(self, port: int, child: Child) -> bool:
        """Stops ``child`` (SIGTERM: it saves what its students were doing, within its grace) and
        waits until it has exited, so that its port is free; SIGKILL past ``exit_within_s`` of its
        grace. Returns False, leaving the child to ``stop``, when a stop is asked meanwhile."""
        self.leaving.append(child)
        self._terminate(child)
        while child.process.poll() is None:
            if self.stopping:
                return False
            if time.monotonic() > self.deadlines[child.pid]:
                _say(
                    f"{_where(port, child)} did not exit within {child.exit_within_s:.0f} s of "
                    "its stop; killing it"
                )
                child.process.kill()
                child.process.wait()
            time.sleep(POLL_S)
        self.leaving.remove(child)
        _say(f"{_where(port, child)} stopped with {child.process.returncode}")
        return True


def _where(port: int, child: Child) -> str:
    return f"the process on port {port} (pid {child.pid})"


def _listens(child: Child, port: int) -> bool:
    if child.process.poll() is not None:
        return False
    owned = ports.listens(child.pid, port)
    if owned is not None:
        return owned
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _held_by_another(port: int, child: Child) -> str:
    others = [(pid, name) for pid, name in ports.holders(port) or [] if pid != child.pid]
    return (
        "; it is held by " + ", ".join(f"pid {pid} ({name})" for pid, name in others)
        if others
        else ""
    )


def _say(line: str) -> None:
    print(f"memora.serve: {line}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    environ = dict(os.environ)
    try:
        setup = checked_setup(sys.argv[1:] if argv is None else argv, environ)
    except ServeError as error:
        print(f"memora.serve: {error}", file=sys.stderr)
        return 2
    if taken := taken_ports(setup):
        for line in taken:
            print(f"memora.serve: {line}", file=sys.stderr)
        print(
            "memora.serve: nothing was started. Stop what holds those ports (a class started "
            "before and still running, say: its pid is above) or choose others with --first-port "
            "and --listen, then run this command again.",
            file=sys.stderr,
        )
        return 2
    running = Supervisor(setup, environ)
    signal.signal(signal.SIGTERM, running.ask_stop)
    signal.signal(signal.SIGINT, running.ask_stop)
    signal.signal(signal.SIGHUP, running.ask_restart)
    if running.start():
        code = running.watch()
    else:
        code = 0 if running.stopping else 1
        if code:
            _say("the class did not start; stopping what was started")
    running.stop()
    return code
