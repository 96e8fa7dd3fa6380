"""A big class as a teacher starts it (``python -m memora.serve``), and what its students see through Caddy.

Shared by ``tests/test_serve.py`` (HTTP and Streamlit's websocket) and ``tests/test_browser_big_class.py``
(Chromium). Caddy is Debian's package; without it these tests skip, and fail under CI.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAILOVER_S = 5.0
"""How long the students keep asking after a stop: Caddy's retry window (``lb_try_duration``). A window to watch,
not a bound the tests assert: how soon a student is back is measured by the benchmark."""
START_WAIT_S = 90.0
"""A bound on a hang while the processes start or stop, not a measure of speed."""


def require_caddy() -> None:
    if shutil.which("caddy") is None:
        reason = "the big-class tests need Debian's caddy (apt-get install caddy; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)


def caddy_pid(log: Path) -> int:
    """The pid ``memora.serve`` logged for its Caddy."""
    line = next(line for line in log.read_text().splitlines() if line.startswith("memora.serve: Caddy (pid "))
    return int(line.split("(pid ", 1)[1].split(")", 1)[0])


def started_pid(log: Path, port: int) -> int:
    """The pid ``memora.serve`` last logged for the process on ``port``."""
    lines = [line for line in log.read_text().splitlines() if line.startswith(f"memora.serve: process on 127.0.0.1:{port} ")]
    return int(lines[-1].rsplit("pid ", 1)[1].rstrip(")"))


def serve(*args: str, env: dict[str, str], log: Path | None = None) -> subprocess.Popen:
    """The command as a teacher types it: a job of its own, as a shell starts it (its process group is the one a
    closing terminal sends SIGHUP); its output (and its children's) to ``log`` when given, else piped."""
    output = subprocess.PIPE if log is None else log.open("w")
    command = [sys.executable, "-m", "memora.serve", *args]
    errors = subprocess.STDOUT if log else subprocess.PIPE
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=errors, text=True, start_new_session=True)


def environment(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    return {**env, **changes}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now (the command's processes and its spare)."""
    for _ in range(100):
        first = free_port()
        if first + count <= 65536 and all(_free(port) for port in range(first + 1, first + count)):
            return first
    raise AssertionError(f"no {count} consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def get(url: str, cookie: str | None = None) -> tuple[int, str | None]:
    """The status of a GET, and the sticky cookie Caddy set (None when it set none)."""
    request = urllib.request.Request(url, headers={"Cookie": f"memora_lb={cookie}"} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, headers = response.status, response.headers
    except urllib.error.HTTPError as error:
        status, headers = error.code, error.headers
    set_cookie = next((v for v in headers.get_all("Set-Cookie") or [] if v.startswith("memora_lb=")), None)
    return status, None if set_cookie is None else set_cookie.split(";")[0].partition("=")[2]


def websocket_status(port: int, cookie: str) -> int:
    """The status line of the websocket handshake the page's script opens (101 when a process takes it)."""
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nCookie: memora_lb={cookie}\r\n"
        f"Origin: http://127.0.0.1:{port}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request.encode())
        return int(connection.recv(1024).split(b" ", 2)[1])


def wait_until_up(ports: list[int], command: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_WAIT_S
    for port in ports:
        while time.monotonic() < deadline and command.poll() is None:
            try:
                if get(f"http://127.0.0.1:{port}/_stcore/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
    assert command.poll() is None, "the command stopped while the class was starting"
    assert all(get(f"http://127.0.0.1:{port}/_stcore/health")[0] == 200 for port in ports), "the class did not start"


def wait_until_ready(log: Path, command: subprocess.Popen) -> None:
    """Until the command says its class is ready: every process it started holds its port and ran the page, and
    Caddy listens (before that, a process stopped by hand fails the start, which then stops the class)."""
    deadline = time.monotonic() + START_WAIT_S
    while not any(line.startswith("memora.serve: ready;") for line in log.read_text().splitlines()):
        assert command.poll() is None, "the command stopped while the class was starting"
        assert time.monotonic() < deadline, "the class did not start"
        time.sleep(0.1)


def pinned_students(proxy: str) -> list[str]:
    """Two students' cookies, pinned to different processes (Caddy pins a new browser at random)."""
    cookies: set[str] = set()
    for _ in range(60):
        status, cookie = get(proxy + "/")
        assert status == 200
        if cookie:
            cookies.add(cookie)
        if len(cookies) == 2:
            return sorted(cookies)
    raise AssertionError(f"Caddy pinned 60 new browsers to {len(cookies)} process(es)")


def wait_until_down(port: int) -> None:
    """Until the process on ``port`` refuses connections (stopped): a bound on a hang, not a measure of speed."""
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.02)
    raise AssertionError(f"the process on {port} did not stop")


def caddy_cookie(port: int) -> str:
    """The sticky cookie that pins a browser to the process on ``port``: Caddy 2's cookie policy, with no secret,
    is the HMAC-SHA256 of the upstream's address under an empty key (the test checks it against Caddy's own)."""
    return hmac.new(b"", f"127.0.0.1:{port}".encode(), hashlib.sha256).hexdigest()


@dataclass
class BigClass:
    """Two processes on ``ports`` behind Caddy on ``listen``, started by ``python -m memora.serve``, whose spare
    port (a rolling restart's successors start there first) is ``spare``."""

    ports: list[int]
    spare: int
    listen: int
    log: Path
    command: subprocess.Popen

    @property
    def proxy(self) -> str:
        return f"http://127.0.0.1:{self.listen}"

    def hang_up(self) -> str:
        """``kill -HUP`` to the command, as a teacher restarts the class mid-lesson; returns the line the command
        ends its rolling restart with, once it is logged, and sets ``ports`` to the class's ports from it."""
        ended = self._restarts_ended()
        self.command.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + START_WAIT_S
        while len(self._restarts_ended()) == len(ended):
            assert time.monotonic() < deadline and self.command.poll() is None, "the rolling restart did not end"
            time.sleep(0.1)
        line = self._restarts_ended()[-1]
        self.ports = [int(port) for port in line.rsplit("ports ", 1)[1].split()]
        return line

    def _restarts_ended(self) -> list[str]:
        marks = ("memora.serve: rolling restart done", "memora.serve: rolling restart stopped")
        return [line for line in self.log.read_text().splitlines() if line.startswith(marks)]

    def stop_process(self, port: int) -> None:
        """SIGTERM to the process on ``port``, as a rolling restart stops it; returns once it refuses connections
        (until then it drains and still answers its own students)."""
        os.kill(started_pid(self.log, port), signal.SIGTERM)
        wait_until_down(port)


@contextmanager
def big_class(store_url: str, folder: Path, **settings: str) -> Iterator[BigClass]:
    """``python -m memora.serve --processes 2`` on free ports against ``store_url``, its log in ``folder``, with the
    teacher's other ``settings`` (``MEMORA_...=value``; none: offline); stopped with SIGTERM on leaving (the test
    then reads ``command.returncode``)."""
    require_caddy()
    first, listen = free_ports(3), free_port()
    ports, log = [first, first + 1], folder / "serve.log"
    options = ("--processes", "2", "--first-port", str(first), "--listen", f"127.0.0.1:{listen}")
    command = serve(*options, env=environment(MEMORA_STORE_URL=store_url, HOME=str(folder), **settings), log=log)
    try:
        wait_until_up(ports, command)
        wait_until_ready(log, command)
        yield BigClass(ports, first + 2, listen, log, command)
    finally:
        command.send_signal(signal.SIGTERM)
        command.wait(timeout=START_WAIT_S)


def saved_conversation(url: str, owner: str, text: str) -> str | None:
    """The id of ``owner``'s conversation whose saved payload holds ``text``, read from PostgreSQL."""
    import psycopg

    with psycopg.connect(url) as db:
        row = db.execute("SELECT id FROM memora_conversations WHERE owner = %s AND payload LIKE %s", (owner, f"%{text}%")).fetchone()
    return None if row is None else row[0]
