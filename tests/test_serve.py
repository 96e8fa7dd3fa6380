"""``python -m memora.serve``: a big class in one command, and the shipped Caddyfile failing over (issue 39).

Run as a teacher runs it: the command in a process of its own, Debian's Caddy, CI's PostgreSQL. Students are
HTTP clients with Caddy's sticky cookie, pinned to each process; one process is then stopped (SIGTERM, as a
rolling restart stops it), and every request of both students must succeed, the pinned one's on the live process,
with no 502 for the page, the health endpoint or the websocket's handshake. How soon is a measure, not a test
(benchmarks/classroom_load.py --rolling-restart, docs/classroom.md).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from benchmarks.harness.processes import streamlit_process
from memora.app.first_run import FirstRunFailed, run_page_once
from memora.classroom.store.owner import new_browser_secret, owner_of
from tests.support.bigclass import (
    FAILOVER_S,
    START_WAIT_S,
    big_class,
    caddy_cookie,
    environment,
    get,
    pinned_students,
    saved_conversation,
    serve,
    started_pid,
    wait_until_up,
    websocket_status,
)
from tests.support.budget import isolated_postgres_url
from tests.support.tab import visit


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


@pytest.mark.integration
def test_two_processes_behind_the_shipped_caddyfile_fail_over_without_a_502(postgres_url, tmp_path):
    with big_class(postgres_url, tmp_path) as running:
        students = pinned_students(running.proxy)
        running.stop_process(running.ports[0])
        stopped_at = time.monotonic()
        statuses: dict[str, list[tuple[float, int]]] = {cookie: [] for cookie in students}
        while time.monotonic() - stopped_at < FAILOVER_S + 2:
            for cookie in students:
                page, health = get(running.proxy + "/", cookie)[0], get(running.proxy + "/_stcore/health", cookie)[0]
                for status in (page, health, websocket_status(running.listen, cookie)):
                    statuses[cookie].append((time.monotonic() - stopped_at, status))
    for seen in statuses.values():
        assert all(status in (200, 101) for _, status in seen), f"a student saw {sorted({s for _, s in seen})}"
    assert running.command.returncode == 0, "Ctrl-C or SIGTERM stops the class cleanly"


@pytest.mark.integration
def test_a_student_pinned_to_a_stopped_process_gets_the_conversation_back_from_postgresql(postgres_url, tmp_path):
    """A rolling restart, for one student: the conversation is written on process A, A is stopped, and the same
    browser (same cookies, same ?c=) opens the page through Caddy: served by B, its conversation restored. How soon
    is measured, not tested (benchmarks/classroom_load.py --rolling-restart, docs/classroom.md)."""
    url = isolated_postgres_url(postgres_url)
    secret = new_browser_secret()
    message = "My name is Ana and I teach English in Taichung."
    with big_class(url, tmp_path) as running:
        a, b = running.ports
        assert set(pinned_students(running.proxy)) == {caddy_cookie(a), caddy_cookie(b)}
        cookies = {"memora_lb": caddy_cookie(a), "memora_browser": secret}
        asyncio.run(visit(running.listen, cookies, message=message))
        deadline = time.monotonic() + START_WAIT_S
        while (cid := saved_conversation(url, owner_of(secret), message)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cid is not None, "the reply was saved by process A"
        running.stop_process(a)
        status, repinned = get(running.proxy + "/", cookies["memora_lb"])
        shown = asyncio.run(visit(running.listen, {**cookies, "memora_lb": repinned or cookies["memora_lb"]}, query=f"c={cid}"))
    assert status == 200 and repinned == caddy_cookie(b), "the page came from process B, which Caddy pinned anew"
    assert any(message in text for text in shown), "the conversation came back from PostgreSQL"


@pytest.mark.integration
def test_a_rolling_restart_at_its_quickest_shows_no_student_a_502(postgres_url, tmp_path):
    """Process A is stopped, and B as soon as A, started again by the command, answers its health check; both
    students' requests go on all the while. A's failed requests while it was down mark it failed in Caddy (passive
    marking) for ``fail_duration`` after the last one: with 10 s, as the Caddyfile had, Caddy then had no process to
    send anyone to once B stopped, and requests got 502 when ``lb_try_duration`` ran out. The benchmark's rolling
    restart found it (benchmarks/classroom_load.py --rolling-restart)."""
    with big_class(postgres_url, tmp_path) as running:
        a, b = running.ports
        students = pinned_students(running.proxy)
        b_stopped: list[float] = []

        def restart() -> None:
            old = started_pid(running.log, a)
            running.stop_process(a)
            deadline = time.monotonic() + START_WAIT_S
            while started_pid(running.log, a) == old and time.monotonic() < deadline:
                time.sleep(0.1)  # the command logs A's new process once the old one has exited
            wait_until_up([a], running.command)
            running.stop_process(b)
            b_stopped.append(time.monotonic())

        restarter = threading.Thread(target=restart)
        restarter.start()
        seen: list[int] = []
        while restarter.is_alive() or time.monotonic() - b_stopped[0] < FAILOVER_S + 2:
            for cookie in students:
                page, health = get(running.proxy + "/", cookie)[0], get(running.proxy + "/_stcore/health", cookie)[0]
                seen += [page, health, websocket_status(running.listen, cookie)]
        restarter.join()
    assert b_stopped, "both processes were stopped in turn"
    assert set(seen) <= {200, 101}, f"a student saw {sorted(set(seen))} in {len(seen)} answers"


@pytest.mark.integration
def test_kill_hup_restarts_each_process_after_its_successor_ran_the_page_and_shows_no_student_a_502(postgres_url, tmp_path):
    """``kill -HUP``: each process's successor starts on the spare port and runs the page before the old process
    stops, so no student waits on a cold process; both students' requests go on all the while."""
    with big_class(postgres_url, tmp_path) as running:
        a, b = running.ports
        before = {started_pid(running.log, a), started_pid(running.log, b)}
        students = pinned_students(running.proxy)
        ended: list[str] = []
        restarter = threading.Thread(target=lambda: ended.append(running.hang_up()))
        restarter.start()
        seen: list[int] = []
        while restarter.is_alive():
            for cookie in students:
                page, health = get(running.proxy + "/", cookie)[0], get(running.proxy + "/_stcore/health", cookie)[0]
                seen += [page, health, websocket_status(running.listen, cookie)]
        restarter.join()
        after = {started_pid(running.log, port) for port in running.ports}
        lines = [line for line in running.log.read_text().splitlines() if line.startswith("memora.serve: ")]
    assert ended == ["memora.serve: rolling restart done; the class is on ports " + f"{a} {running.spare}"]
    assert sorted(running.ports) == [a, running.spare] and not before & after, "two new processes; b's port is the spare"
    assert set(seen) <= {200, 101}, f"a student saw {sorted(set(seen))} in {len(seen)} answers"
    for old_port, successor_port in ((a, running.spare), (b, a)):
        old = next(pid for pid in before if any(f"127.0.0.1:{old_port} (pid {pid})" in line for line in lines))
        successor = next(pid for pid in after if any(f"127.0.0.1:{successor_port} (pid {pid})" in line for line in lines))
        ran = _first(lines, f"port {successor_port} (pid {successor}) ran the page")
        assert ran < _first(lines, f"port {old_port} (pid {old}) stopped"), "the successor ran the page before the stop"


def _first(lines: list[str], text: str) -> int:
    return next(index for index, line in enumerate(lines) if text in line)


@pytest.mark.integration
def test_a_rolling_restart_whose_successor_cannot_start_leaves_the_class_on_its_processes(postgres_url, tmp_path):
    """Something else holds the spare port: the successor cannot listen there, so it is given up and the restart
    ends before any process is stopped; the students stay where they were."""
    with big_class(postgres_url, tmp_path) as running:
        a, b = running.ports
        before = [started_pid(running.log, port) for port in (a, b)]
        students = pinned_students(running.proxy)
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", running.spare))  # bound, not listening: a bind there fails, a connect is refused
            ended = running.hang_up()
        after = [started_pid(running.log, port) for port in (a, b)]
        answers = [get(running.proxy + "/", cookie) for cookie in students]
    assert ended == f"memora.serve: rolling restart stopped; the class stays on ports {a} {b}"
    assert after == before and running.ports == [a, b], "no process of the class was stopped"
    assert answers == [(200, None), (200, None)], "each student is still on her own process (no cookie set anew)"


@pytest.mark.integration
def test_the_first_run_of_a_page_with_a_bad_setting_fails_with_what_the_page_shows(tmp_path):
    """``run_page_once``, which ``memora.serve`` runs on every new process, against a real one: a clean page runs;
    a page that shows an error (an empty cap, which stops the app) fails with that error's first line."""
    env = environment(MEMORA_DATA_DIR=str(tmp_path), HOME=str(tmp_path))
    with streamlit_process(env, tmp_path / "good.log") as (url, _):
        assert run_page_once(int(url.rsplit(":", 1)[1])) > 0
    with (
        streamlit_process({**env, "MEMORA_MAX_TURNS": ""}, tmp_path / "bad.log") as (url, _),
        pytest.raises(FirstRunFailed, match=r"^the page shows an error: Memora cannot start until"),
    ):
        run_page_once(int(url.rsplit(":", 1)[1]))
