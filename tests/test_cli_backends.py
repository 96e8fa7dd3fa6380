"""The REPL shows counted against billed input, and chats through each backend over real HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness.servers import ChatServer, ResponsesServer
from memora.app.repl import format_gap, format_stats, format_usage
from memora.teaching.story import TurnAccount
from memora.text.usage import Usage, UsageRecord

ROOT = Path(__file__).resolve().parent.parent


def _stats(**changes) -> TurnAccount:
    """A turn's account from its reply's record (``changes`` are the record's fields), 110 tokens into the session."""
    values = dict(turn=1, kind="reply", model="gpt-5-mini", counted_input_tokens=95, input_tokens=100, output_tokens=10, total_tokens=110)
    figures = dict(latency_s=0.0, context_messages=1, newly_summarized=0, summary_tokens=0)
    return TurnAccount(1, UsageRecord(**{**values, **figures, **changes}), folds=(), session_total=110)


def test_stats_show_the_gap_between_counted_and_billed() -> None:
    text = format_stats(_stats())
    assert "Counted input tokens: 95" in text
    assert "Actual input tokens: 100 (reported by the server)" in text
    assert "Actual input tokens: 100 (billed by OpenAI)" in format_stats(_stats(bills=True, source="billed by OpenAI"))
    assert "Estimate gap (counted - actual): -5 tokens (-5.0% of actual)" in text


def test_stats_label_a_local_estimate_and_show_no_gap_for_it() -> None:
    text = format_stats(_stats(input_tokens=95, estimated=True))
    assert "Actual input tokens: 95 (estimated locally: the server reported no usage)" in text
    assert "Estimate gap (counted - actual): none to show" in text


def test_gap_when_nothing_was_reported() -> None:
    assert format_gap(95, None, False).startswith("not available")
    assert format_gap(0, 0, False) == "+0 tokens"


def test_usage_lists_every_request_with_its_gap() -> None:
    records = [
        UsageRecord.of(turn=1, kind="reply", model="m", counted_input_tokens=95, usage=Usage(100, 10, 4, 64), latency_s=0.1),
        UsageRecord.of(turn=2, kind="summary", model="m", counted_input_tokens=50, usage=Usage(50, 20, estimated=True), latency_s=0.1),
    ]
    lines = format_usage(records).splitlines()
    assert lines[3].split() == ["1", "reply", "95", "100", "-5", "10", "4", "64"]
    assert lines[4].split() == ["2", "summary", "50", "50~", "-", "20", "0", "0"]
    assert "estimated locally" in lines[5]
    assert "(no requests yet)" in format_usage([])


def _repl(environ: dict[str, str], lines: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORA_"))}
    result = subprocess.run(
        [sys.executable, "-m", "memora"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env={**env, "MEMORA_MAX_RETRIES": "0", "MEMORA_TIMEOUT": "10", **environ},
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("report_usage", [True, False], ids=["usage", "no-usage"])
def test_repl_chats_through_a_chat_completions_server(report_usage: bool) -> None:
    with ChatServer(input_overhead=3, report_usage=report_usage) as server:
        out = _repl(
            {"MEMORA_BACKEND": "chat", "MEMORA_BASE_URL": server.url, "MEMORA_MODEL": "llama3.2"},
            ["Hello, I'm Ana.", "usage", "exit"],
        )
        assert server.requests[-1].body["model"] == "llama3.2"
    assert f"Memora: {server.reply_text}" in out
    assert "OpenAI-compatible server" in out
    if report_usage:
        assert "Estimate gap (counted - actual): -3 tokens" in out
    else:
        assert "estimated locally" in out


def test_repl_chats_through_the_responses_api_with_server_counting() -> None:
    with ResponsesServer(input_overhead=6) as server:
        out = _repl(
            {"OPENAI_API_KEY": "sk-repl-test", "OPENAI_BASE_URL": server.url, "MEMORA_TOKEN_COUNTING": "api"},
            ["Hello, I'm Ana.", "exit"],
        )
        paths = server.paths()
    assert f"Memora: {server.reply_text}" in out
    assert "budget counted by: the server's tokenizer, exact (OpenAI responses.input_tokens.count)" in out
    # The local count misses the server's 6 tokens of overhead; the server's own count, which held the budget, does not.
    assert "Estimate gap (counted - actual): -6 tokens" in out
    server_count = re.search(r"Input tokens by the server's tokenizer: (\d+)", out)
    assert server_count is not None and f"Actual input tokens: {server_count.group(1)} " in out
    assert paths == ["/v1/responses/input_tokens", "/v1/responses"]


def test_repl_reports_a_failed_turn_without_the_key() -> None:
    with ResponsesServer() as server:
        server.queue(lambda handler, request: handler.send_json(401, {"error": {"message": "Incorrect API key provided: sk-repl-SECRET"}}))
        out = _repl({"OPENAI_API_KEY": "sk-repl-SECRET", "OPENAI_BASE_URL": server.url}, ["Hello", "history", "exit"])
    assert "Request failed: The model server rejected the API key (HTTP 401)" in out
    assert "sk-repl-SECRET" not in out
    assert "--- Full Conversation History ---\n(empty)" in out


def test_repl_rejects_a_chat_backend_without_a_url() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORA_"))}
    result = subprocess.run(
        [sys.executable, "-m", "memora"],
        input="exit\n",
        capture_output=True,
        text=True,
        env={**env, "MEMORA_BACKEND": "chat", "MEMORA_MODEL": "llama3.2"},
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2
    assert "MEMORA_BASE_URL" in result.stderr
