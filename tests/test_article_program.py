"""The article's program as its readers paste it: ``ShortTermMemory(client=OpenAI(), ...)`` and its v0.7 main loop.

The loop (``tests/article_v07_loop.py``) runs as a program of its own with the article's ``client = OpenAI()``,
pointed by ``OPENAI_BASE_URL`` at a local Responses server that records every request.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import openai
import pytest

from benchmarks.harness.servers import ResponsesServer
from memora.app.build import build_memory
from memora.app.repl import repl
from memora.app.settings import load_settings
from memora.backends.offline import OfflineBackend
from memora.backends.openai_responses import OpenAIResponsesBackend

ROOT = Path(__file__).resolve().parent.parent
TURNS = [f"Turn {i}: I am practising travel English." for i in range(1, 7)]


def client_for(server: ResponsesServer) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test-article", base_url=server.url, max_retries=0)


def test_the_articles_program_runs_as_written_with_its_own_openai_client():
    script = "\n".join([*TURNS, "history", "context", "summary", "status", "exit"]) + "\n"
    with ResponsesServer(summary_text="- The user practises travel English.") as server:
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "sk-test-article",
        }
        result = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "article_v07_loop.py")],
            input=script,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Request failed" not in out and out.count("--- Memory Status ---") == 6
    assert "History messages: 12" in out and "Summary available: True" in out
    assert "- The user practises travel English." in out
    # What the server was sent: the loop's own six reply requests, and the memory's summary requests in between,
    # each folding the oldest pairs in the article's layout.
    replies = [r for r in requests if r.path.endswith("/responses") and not r.body.get("stream")]
    assert len(replies) >= 6
    summaries = [r for r in replies if r.body["input"] and isinstance(r.body["input"], str)]
    assert summaries and summaries[0].body["input"].lstrip().startswith("Existing summary:\n(empty)")
    assert "user: Turn 1: I am practising travel English." in summaries[0].body["input"]
    last = [r for r in replies if isinstance(r.body["input"], list)][-1].body["input"]
    assert last[0]["role"] == "developer" and "- The user practises travel English." in last[0]["content"]
    assert last[-1] == {"role": "user", "content": TURNS[-1]}


def test_the_class_takes_the_articles_client_from_every_import_path():
    import memora
    import memora.memory
    import memora.memory.core
    from memora import ShortTermMemory

    assert ShortTermMemory is memora.memory.ShortTermMemory is memora.memory.core.ShortTermMemory
    with ResponsesServer() as server:
        memory = ShortTermMemory(client=client_for(server), model="gpt-5-mini", max_input_tokens=1000, max_recent_turns=3)
        with memory.turn("Hello, can you help me with travel English?") as turn:
            reply = turn.run()
        sent = server.requests[-1].body
    assert isinstance(memory.server.backend, OpenAIResponsesBackend)
    assert reply == server.reply_text and memory.history[-1].content == reply
    assert sent["input"] == [{"role": "user", "content": "Hello, can you help me with travel English?"}]
    offline = OfflineBackend()
    assert memora.ShortTermMemory(client=offline).server.backend is offline
    with pytest.raises(TypeError, match="OpenAI client"):
        ShortTermMemory(client=object())


def test_the_repl_and_the_pages_factory_take_the_articles_client():
    with ResponsesServer(summary_text="- The user practises travel English.") as server:
        memory = build_memory(load_settings(secrets={}, environ={}), client_for(server))
        inputs, output = iter([*TURNS[:4], "status", "exit"]), []
        repl(memory, read=lambda prompt: next(inputs), write=output.append)
        billed = list(server.billed)
    out = "\n".join(output)
    assert "Request failed" not in out and out.count("--- Memory Status ---") == 4
    assert isinstance(memory.server.backend, OpenAIResponsesBackend)
    assert [kind for kind, _ in billed].count("reply") == 4
    assert memory.session_total_tokens == sum(tokens for _, tokens in billed)
