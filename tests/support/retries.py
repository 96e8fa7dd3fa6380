"""A classroom memory against a local model server, and what its budget and the server recorded (issue 39).

Used by tests/test_summary_retries.py and tests/test_reply_retries.py: requests answered slower than
``MEMORA_TIMEOUT`` through the real SDK, behind the page's own guarded backend and a server cap.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from benchmarks.harness.servers import ModelServer
from memora.app.page.state import new_memory
from memora.app.settings import load_settings
from memora.classroom.server_budget import USAGE_DB_NAME
from memora.memory import ShortTermMemory

TIMEOUT_S = 0.5
ANSWERED_AFTER_S = 1.0
"""Each slow request is answered this long after it is asked: after the client stopped waiting, and billed all the same."""
BILLS_WAIT_S = 30.0
"""How long to wait for the server's last late answers to be billed: a bound on a hang, not a measure of speed."""
CHAT_ENV = {"MEMORA_BACKEND": "chat"}
"""The settings that put the memory on ``ChatCompletionsBackend`` (``ChatServer``); the default is the Responses API."""


def classroom_memory(server_url: str, data_dir: Path, cap: int, **extra: str) -> ShortTermMemory:
    """The page's memory on these settings: the guarded SDK backend and the server-wide ledger under ``data_dir``."""
    environ = {
        "OPENAI_API_KEY": "sk-test-request-retries",
        "OPENAI_BASE_URL": server_url,
        "MEMORA_TIMEOUT": str(TIMEOUT_S),
        "MEMORA_MAX_SERVER_TOKENS": str(cap),
        "MEMORA_DATA_DIR": str(data_dir),
        "MEMORA_MODEL": "gpt-4.1-mini",  # not a reasoning model: no thinking allowance in each booking
        "MEMORA_STORE_URL": "off",
        **extra,
    }
    return new_memory(load_settings({}, environ))


def ledger_rows(data_dir: Path) -> list[tuple[str, int, bool]]:
    """``(kind, tokens, estimated)`` of every request in the server-wide ledger, in order."""
    with sqlite3.connect(data_dir / USAGE_DB_NAME) as db:
        rows = db.execute("SELECT kind, tokens, estimated, settled FROM requests ORDER BY id").fetchall()
    assert all(settled for *_, settled in rows), "every booking settled"
    return [(kind, tokens, bool(estimated)) for kind, tokens, estimated, _ in rows]


def every_bill(server: ModelServer) -> list[tuple[str, int]]:
    """The server's bills once each request it received is answered: late answers are billed after the client left."""
    deadline = time.monotonic() + BILLS_WAIT_S
    while len(server.billed) < len(server.requests) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.billed) == len(server.requests), "every request the server received was answered and billed"
    return list(server.billed)
