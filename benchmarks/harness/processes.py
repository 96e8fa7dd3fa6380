"""Child processes the tests start: free ports, `streamlit run`, and a clean stop."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository: benchmarks/harness/ is two levels down


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """Terminates ``process``, and kills it if it has not ended 10 s later."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_answering(url: str, process: subprocess.Popen, limit_s: float, failure: str) -> None:
    """Returns once ``url`` answers 200; fails the test with ``failure`` if ``process`` exits or ``limit_s`` passes."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(failure)
        time.sleep(0.3)


@contextmanager
def streamlit_run(env: Mapping[str, str], log: Path, *extra: str) -> Iterator[str]:
    """`streamlit run streamlit_app.py` on a free 127.0.0.1 port, with ``env`` as its whole environment.

    Yields the page's URL once /_stcore/health answers; fails the test if that
    takes over 60 s or the server exits. Output is appended to ``log``.
    """
    with streamlit_process(env, log, *extra) as (url, _process):
        yield url


@contextmanager
def streamlit_process(env: Mapping[str, str], log: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """``streamlit_run``, yielding the process too, for a test that stops it itself (a SIGTERM)."""
    port = free_port()
    log.parent.mkdir(exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "streamlit_app.py",
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                *extra,
            ],
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_answering(url + "/_stcore/health", process, 60, f"streamlit did not start; see {log}")
            yield url, process
        finally:
            if process.poll() is None:
                stop(process)
