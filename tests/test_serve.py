"""``python -m memora.serve``: a big class in one command, and the shipped Caddyfile failing over (issue 39).

Run as a teacher runs it: the command in a process of its own, Debian's Caddy, CI's PostgreSQL. Students are
HTTP clients with Caddy's sticky cookie, pinned to each process; one process is then stopped (SIGTERM, as a
rolling restart stops it), and every request of both students must succeed, the pinned one's on the live process
within 5 s, with no 502 for the page, the health endpoint or the websocket's handshake.
"""

from __future__ import annotations

import asyncio
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
from pathlib import Path

import pytest

from memora.classroom.store.owner import new_browser_secret, owner_of
from tests.support.budget import isolated_postgres_url
from tests.support.tab import visit

ROOT = Path(__file__).resolve().parents[1]
FAILOVER_S = 5.0
"""The issue's goal: a student pinned to a stopped process is on a live one within 5 s."""
START_WAIT_S = 90.0
"""A bound on a hang while the processes start, not a measure of speed."""


def serve(*args: str, env: dict[str, str], log: Path | None = None) -> subprocess.Popen:
    """The command as a teacher types it; its output (and its children's) to ``log`` when given, else piped."""
    output = subprocess.PIPE if log is None else log.open("w")
    command = [sys.executable, "-m", "memora.serve", *args]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT if log else subprocess.PIPE, text=True)


def environment(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    return {**env, **changes}


def test_without_a_postgresql_url_it_starts_nothing_and_names_the_variable():
    for value in ("", "   ", "sqlite:////tmp/memora-one-file.sqlite3"):
        done = serve("--processes", "2", env=environment(MEMORA_STORE_URL=value))
        out, err = done.communicate(timeout=60)
        assert done.returncode == 2 and "MEMORA_STORE_URL must name a PostgreSQL database" in err
        assert "memora-one-file" not in err and "process on" not in out, "nothing started, and the value is not quoted"


def test_without_caddy_it_starts_nothing_and_says_how_to_install_it(tmp_path):
    url = "postgresql://memora:a-secret-password@127.0.0.1:5432/memora"
    done = serve(env=environment(MEMORA_STORE_URL=url, PATH=str(tmp_path)))
    out, err = done.communicate(timeout=60)
    assert done.returncode == 2 and "apt-get install caddy" in err and "process on" not in out
    assert "a-secret-password" not in err + out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


@pytest.mark.integration
def test_two_processes_behind_the_shipped_caddyfile_fail_over_within_5_s_without_a_502(postgres_url, tmp_path):
    if shutil.which("caddy") is None:
        reason = "the big-class test needs Debian's caddy (apt-get install caddy; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)
    first, listen = free_port(), free_port()
    ports = [first, first + 1]
    log = tmp_path / "serve.log"
    options = ("--processes", "2", "--first-port", str(first), "--listen", f"127.0.0.1:{listen}")
    command = serve(*options, env=environment(MEMORA_STORE_URL=postgres_url, HOME=str(tmp_path)), log=log)
    proxy = f"http://127.0.0.1:{listen}"
    try:
        wait_until_up(ports, command)
        students = pinned_students(proxy)
        pids = {}
        for line in log.read_text().splitlines():
            if line.startswith("memora.serve: process on 127.0.0.1:"):
                pids[int(line.split("127.0.0.1:")[1].split()[0])] = int(line.rsplit("pid ", 1)[1].rstrip(")"))
        stopped_at = time.monotonic()
        os.kill(pids[ports[0]], signal.SIGTERM)
        statuses: dict[str, list[tuple[float, int]]] = {cookie: [] for cookie in students}
        while time.monotonic() - stopped_at < FAILOVER_S + 2:
            for cookie in students:
                for status in (get(proxy + "/", cookie)[0], get(proxy + "/_stcore/health", cookie)[0], websocket_status(listen, cookie)):
                    statuses[cookie].append((time.monotonic() - stopped_at, status))
    finally:
        command.send_signal(signal.SIGTERM)
        command.wait(timeout=60)
    for seen in statuses.values():
        assert all(status in (200, 101) for _, status in seen), f"a student saw {sorted({s for _, s in seen})}"
        assert seen[0][0] <= FAILOVER_S, f"the first answer took {seen[0][0]:.1f} s"
    assert command.returncode == 0


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


def saved_conversation(url: str, owner: str, text: str) -> str | None:
    """The id of ``owner``'s conversation whose saved payload holds ``text``, read from PostgreSQL."""
    import psycopg

    with psycopg.connect(url) as db:
        row = db.execute("SELECT id FROM memora_conversations WHERE owner = %s AND payload LIKE %s", (owner, f"%{text}%")).fetchone()
    return None if row is None else row[0]


@pytest.mark.integration
def test_a_student_pinned_to_a_stopped_process_gets_the_conversation_back_from_postgresql_within_5_s(postgres_url, tmp_path):
    """A rolling restart, for one student: the conversation is written on process A, A is stopped, and the same
    browser (same cookies, same ?c=) opens the page through Caddy: served by B, its conversation restored, within
    5 s of A refusing connections (before that, A is draining and still answers its students)."""
    if shutil.which("caddy") is None:
        pytest.skip("the big-class test needs Debian's caddy (apt-get install caddy; .ci/run installs it)")
    url = isolated_postgres_url(postgres_url)
    first, listen = free_port(), free_port()
    ports = [first, first + 1]
    log = tmp_path / "serve.log"
    options = ("--processes", "2", "--first-port", str(first), "--listen", f"127.0.0.1:{listen}")
    command = serve(*options, env=environment(MEMORA_STORE_URL=url, HOME=str(tmp_path)), log=log)
    secret = new_browser_secret()
    message = "My name is Ana and I teach English in Taichung."
    try:
        wait_until_up(ports, command)
        assert set(pinned_students(f"http://127.0.0.1:{listen}")) == {caddy_cookie(port) for port in ports}
        cookies = {"memora_lb": caddy_cookie(ports[0]), "memora_browser": secret}
        asyncio.run(visit(listen, cookies, message=message))
        deadline = time.monotonic() + START_WAIT_S
        while (cid := saved_conversation(url, owner_of(secret), message)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cid is not None, "the reply was saved by process A"
        pid = next(int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in log.read_text().splitlines() if f":{ports[0]} (pid" in line)
        os.kill(pid, signal.SIGTERM)
        wait_until_down(ports[0])  # until then A still answers its own students (its shutdown drain), as it should
        stopped_at = time.monotonic()
        status, repinned = get(f"http://127.0.0.1:{listen}/", cookies["memora_lb"])
        shown = asyncio.run(visit(listen, {**cookies, "memora_lb": repinned or cookies["memora_lb"]}, query=f"c={cid}"))
        back_after = time.monotonic() - stopped_at
    finally:
        command.send_signal(signal.SIGTERM)
        command.wait(timeout=60)
    assert status == 200 and repinned == caddy_cookie(ports[1]), "the page came from process B, which Caddy pinned anew"
    assert any(message in text for text in shown), "the conversation came back from PostgreSQL"
    assert back_after <= FAILOVER_S, f"the conversation was back {back_after:.1f} s after process A stopped"
