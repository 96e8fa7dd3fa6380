"""The classroom benchmark's students speak Streamlit's own protocol to a real `streamlit run`.

What they send must reach the model as the page's user messages, and the timings
they report must come from the reply they were given, not from other text on the page.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from benchmarks.classroom_load import PacedChatServer, wave
from tests.processes import streamlit_run


def page_env(tmp_path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    return {**env, "MEMORA_DATA_DIR": str(tmp_path), **settings}


def chat(url: str, messages: int, offline: bool):
    args = argparse.Namespace(offline=offline, messages=messages, think=0.0)
    crowd, _ = asyncio.run(wave(url.replace("http://", "ws://") + "/_stcore/stream", 1, args, pids=[], seed=0))
    return crowd[0]


def test_a_simulated_student_chats_with_the_model_through_the_real_page(tmp_path):
    with PacedChatServer(latency_s=0.2, rate=100.0, reply_tokens=6) as model:
        env = page_env(tmp_path, MEMORA_BACKEND="chat", MEMORA_BASE_URL=model.url, MEMORA_MODEL="paced")
        with streamlit_run(env, tmp_path / "streamlit.log") as url:
            student = chat(url, messages=2, offline=False)

    replies = [r for r in model.requests if r.body.get("stream")]
    # Each message reached the model as the request's current user message, in order.
    assert [r.body["messages"][-1]["content"].split(":")[0] for r in replies] == ["Message s1m0", "Message s1m1"]
    # The second request carries the first turn, reply included: the page committed it.
    assert any(m["role"] == "assistant" and "(end s1m0)" in m["content"] for m in replies[1].body["messages"])
    assert [t.error for t in student.turns] == [None, None]
    for turn in student.turns:
        assert turn.first_token_s is not None and turn.done_s is not None
        assert 0.2 <= turn.first_token_s <= turn.done_s  # no earlier text on the page passed for the reply


def test_a_simulated_student_gets_the_offline_explanation(tmp_path):
    with streamlit_run(page_env(tmp_path, MEMORA_BACKEND="offline"), tmp_path / "streamlit.log") as url:
        student = chat(url, messages=2, offline=True)

    assert [t.error for t in student.turns] == [None, None]
    for turn in student.turns:
        assert turn.first_token_s is not None and turn.done_s is not None
        assert turn.first_token_s <= turn.done_s
