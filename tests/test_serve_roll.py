"""A rolling restart with one-tab students mid-reply keeps each conversation whole (issue 44, finding 1).

A small class, as a teacher starts it: ``python -m memora.serve --processes 2`` behind the shipped Caddyfile on CI's
PostgreSQL, a paced local model (no network) whose replies take seconds, and students who are Streamlit's websocket
protocol, each with her own cookie and one tab (``benchmarks/classroom_load.py``'s ``Student``: her page reconnects
when its process stops, naming her session as the frontend does, and follows the page's fragment timers). While they
chat, ``kill -HUP`` rolls both processes, so each process stops with its students mid-reply; each stopping process
finishes its replies within its grace and saves them, while its students' pages are already back on the other one.

What the students find in PostgreSQL afterwards (``audit_class``) is asserted, never how soon: no conversation forked,
every reply the server budget billed is in the conversation each student continues, every message her page drew back
is in it, and no page tells her of another tab. With the catch-up turned off (``read(catch_up=False)``) this roll
forked 3 of the 6 students, and lost 3 of their billed replies and 3 typed messages.
"""

from __future__ import annotations

import argparse
import asyncio
import threading

import pytest

from benchmarks.classroom_load import ROLL_SERVER_TOKENS, app_env, audit_class, hang_up, model_server, postgres_schema, served_class, wave
from tests.support.bigclass import require_caddy

pytestmark = pytest.mark.integration

STUDENTS = 6
MESSAGES = 6
REPLY = {"latency_s": 0.5, "rate": 8.0, "reply_tokens": 24}
"""About 3.5 s a reply: long enough that a process told to stop has students mid-reply, short enough for its grace."""
GRACE_S = "15"
"""The processes' shutdown grace: far above a reply, so that every reply running at a stop is finished and saved."""


def test_a_rolling_restart_with_one_tab_students_mid_reply_forks_no_conversation_and_keeps_every_billed_reply(postgres_url, tmp_path):
    require_caddy()
    with model_server(**REPLY) as model_url:
        env = {
            **app_env(model_url, str(tmp_path)),
            "MEMORA_STORE_URL": postgres_schema(postgres_url),
            "MEMORA_MAX_SERVER_TOKENS": str(ROLL_SERVER_TOKENS),
            "MEMORA_SHUTDOWN_GRACE_S": GRACE_S,
        }
        with served_class(2, env, 30, tmp_path / "serve.log") as served:
            ws_url = served.url.replace("http://", "ws://") + "/_stcore/stream"
            args = argparse.Namespace(offline=False, messages=MESSAGES, think=0.3)
            roll = threading.Thread(target=hang_up, args=(served,), daemon=True)
            # The roll begins as the students send their first messages, so each process stops with replies running.
            crowd, _ = asyncio.run(wave(ws_url, STUDENTS, args, [], seed=44, on_start=roll.start))
            roll.join()
            assert served.logged("rolling restart done") == 1, "both processes were rolled"
            audit = audit_class(served.store_url, crowd)
    pages_back = sum(len(student.page_back_s) for student in crowd)
    cut = [turn for student in crowd for turn in student.turns if turn.error == "connection closed"]
    assert pages_back >= 1 and cut, "some student's page came back on the other process with her reply still running"
    assert audit.forks == 0, f"{audit.forked} of {audit.students} students' conversations forked ({audit.forks} copies)"
    assert audit.billed is not None and audit.kept == audit.billed, f"{audit.kept} of {audit.billed} billed replies kept"
    assert audit.typed >= STUDENTS and audit.lost == 0, f"{audit.lost} of {audit.typed} typed messages lost"
    told = {text for student in crowd for text in student.alerts}
    assert not [text for text in told if "Another tab" in text], "a one-tab student is never told of another tab"
