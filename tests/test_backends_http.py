"""Both SDK backends end to end: ShortTermMemory -> backend -> openai SDK -> real HTTP on 127.0.0.1.

Each fault test checks the memory afterwards: complete user/assistant pairs only,
summary and pointer unchanged, no ledger record for the failed reply, the user's
text kept on ``turn.user_text``, and the API key absent from the error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import openai
import pytest

from benchmarks.harness.servers import ChatServer, ModelServer, ResponsesServer, closed_port, cut_after, slow_start, stall, status
from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend
from memora.backends.openai_errors import ModelServerError
from memora.backends.openai_responses import REASONING_ALLOWANCE, OpenAIResponsesBackend
from memora.memory import ShortTermMemory
from memora.memory.backend import BackendError
from memora.memory.core import last_reply
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE, SYSTEM_PROMPT
from memora.text.tokens import count_text
from tests.support.memory import stream

OPENAI_KEY = "sk-test-SECRET-4f1c9a"
CHAT_KEY = "local-secret-7781"  # not sk- shaped: only verbatim redaction can hide it


@dataclass
class Rig:
    """A server, a backend pointed at it, and the key the client sends."""

    server: ModelServer
    backend: OpenAIResponsesBackend | ChatCompletionsBackend
    key: str

    def memory(self, **options) -> ShortTermMemory:
        options.setdefault("max_recent_turns", 10)
        return ShortTermMemory(self.backend, model=options.pop("model", "gpt-5-mini"), **options)


def _client(url: str, key: str, *, timeout: float = 10.0, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=url, timeout=timeout, max_retries=max_retries)


@pytest.fixture(params=["responses", "chat"])
def rig(request) -> Iterator[Rig]:
    """Every test that takes ``rig`` runs once against each backend."""
    if request.param == "responses":
        with ResponsesServer(input_overhead=4) as server:
            yield Rig(server, OpenAIResponsesBackend(_client(server.url, OPENAI_KEY)), OPENAI_KEY)
    else:
        with ChatServer(input_overhead=4) as server:
            yield Rig(server, ChatCompletionsBackend(_client(server.url, CHAT_KEY)), CHAT_KEY)


def snapshot(memory: ShortTermMemory) -> tuple:
    return (list(memory.history), memory.summary, memory.summarized_message_count, list(memory.ledger))


def assert_complete_pairs(memory: ShortTermMemory) -> None:
    roles = [m.role for m in memory.history]
    assert roles == ["user", "assistant"] * (len(roles) // 2)


def failed_turn(memory: ShortTermMemory, text: str) -> tuple[BackendError, object, list[str]]:
    """Runs a turn that must fail; returns the error, the turn and the deltas seen before it."""
    seen: list[str] = []
    with pytest.raises(BackendError) as caught, memory.turn(text) as turn:
        for delta in turn.stream():
            seen.append(delta)
    return caught.value, turn, seen


# -- the happy path ---------------------------------------------------------------------


def test_reply_streams_text_and_bills_usage(rig: Rig) -> None:
    memory = rig.memory()
    deltas, turn = stream(memory, "Hi, I'm Ana. Is 'I has a cat' right?")

    assert deltas == list(rig.server.deltas)
    assert memory.history[-1] == Message("assistant", rig.server.reply_text)
    record = memory.ledger[-1]
    assert (record.kind, record.estimated) == ("reply", False)
    assert record.input_tokens == record.counted_input_tokens + 4  # the server's overhead, exactly
    assert turn.stats.record.input_tokens == record.input_tokens
    assert rig.server.requests[-1].headers["authorization"] == f"Bearer {rig.key}"


def test_responses_request_carries_instructions_and_developer_summary() -> None:
    with ResponsesServer() as server:
        memory = ShortTermMemory(OpenAIResponsesBackend(_client(server.url, OPENAI_KEY)), max_recent_turns=1)
        for text in ("My name is Ana.", "My level is B1.", "How do I say 'gato'?"):
            stream(memory, text)
        summary_body, reply_body = server.requests[-2].body, server.requests[-1].body

    assert summary_body["max_output_tokens"] == memory.limits.max_summary_tokens + REASONING_ALLOWANCE
    assert summary_body["reasoning"] == {"effort": "low"}
    assert "stream" not in summary_body
    assert reply_body["instructions"] == SYSTEM_PROMPT
    assert reply_body["stream"] is True
    assert reply_body["input"][0] == {"role": "developer", "content": SUMMARY_PREAMBLE + server.summary_text}
    assert reply_body["input"][1:] == [
        {"role": "user", "content": "My level is B1."},
        {"role": "assistant", "content": server.reply_text},
        {"role": "user", "content": "How do I say 'gato'?"},
    ]
    assert memory.summary == server.summary_text


def test_responses_summary_for_a_non_reasoning_model_has_no_reasoning_options() -> None:
    with ResponsesServer() as server:
        memory = ShortTermMemory(OpenAIResponsesBackend(_client(server.url, OPENAI_KEY)), model="gpt-4.1-mini", max_recent_turns=0)
        stream(memory, "My name is Ana.")
        stream(memory, "My level is B1.")
        summary_body = server.requests[-2].body

    assert summary_body["max_output_tokens"] == memory.limits.max_summary_tokens
    assert "reasoning" not in summary_body


def test_responses_reasoning_and_cached_tokens_reach_the_ledger() -> None:
    with ResponsesServer(cached_tokens=64, reasoning_tokens=128) as server:
        memory = ShortTermMemory(OpenAIResponsesBackend(_client(server.url, OPENAI_KEY)))
        stream(memory, "Hello!")

    record = memory.ledger[-1]
    assert (record.cached_tokens, record.reasoning_tokens) == (64, 128)
    assert record.output_tokens == 128 + count_text(server.reply_text)  # reasoning is billed as output


def test_responses_api_token_counting_asks_the_count_endpoint() -> None:
    with ResponsesServer(input_overhead=9) as server:
        memory = ShortTermMemory(OpenAIResponsesBackend(_client(server.url, OPENAI_KEY), count_remotely=True))
        stream(memory, "Hello!")
        count_body = next(r.body for r in server.requests if r.path.endswith("/responses/input_tokens"))

    assert count_body == {"model": memory.model, "instructions": SYSTEM_PROMPT, "input": [{"role": "user", "content": "Hello!"}]}
    record = memory.ledger[-1]
    assert record.server_counted_input_tokens == record.input_tokens  # the server counted what it billed
    assert record.counted_input_tokens == record.input_tokens - 9  # the local count, without the server's overhead


def test_chat_request_sends_one_system_message_with_the_summary_and_asks_for_usage() -> None:
    with ChatServer() as server:
        memory = ShortTermMemory(ChatCompletionsBackend(_client(server.url, NO_KEY)), model="llama3.2", max_recent_turns=1)
        for text in ("My name is Ana.", "My level is B1.", "How do I say 'gato'?"):
            stream(memory, text)
        summary_body, reply_body = server.requests[-2].body, server.requests[-1].body

    assert summary_body["max_tokens"] == memory.limits.max_summary_tokens
    assert [m["role"] for m in summary_body["messages"]] == ["system", "user"]
    assert reply_body["stream"] is True
    assert reply_body["stream_options"] == {"include_usage": True}
    # Many chat templates keep only the first system message: the summary travels inside it.
    assert reply_body["messages"][0] == {
        "role": "system",
        "content": SYSTEM_PROMPT.rstrip() + "\n\n" + SUMMARY_PREAMBLE + server.summary_text,
    }
    assert [m["role"] for m in reply_body["messages"][1:]] == ["user", "assistant", "user"]
    assert reply_body["max_tokens"] == memory.limits.max_reply_tokens
    assert not any(m["role"] == "developer" for r in server.requests for m in r.body["messages"])


def test_chat_without_usage_counts_locally_and_marks_the_estimate() -> None:
    with ChatServer(report_usage=False) as server:
        memory = ShortTermMemory(ChatCompletionsBackend(_client(server.url, NO_KEY)), model="llama3.2", max_recent_turns=0)
        stream(memory, "My name is Ana.")
        stream(memory, "My level is B1.")

    reply, summary = memory.ledger[-1], memory.ledger[-2]
    assert reply.estimated and summary.estimated
    assert reply.input_tokens == reply.counted_input_tokens
    assert summary.input_tokens == summary.counted_input_tokens, "the estimate is the count the memory checked"
    assert reply.output_tokens > 0
    assert last_reply(memory).estimated


def test_chat_without_a_key_sends_the_placeholder() -> None:
    with ChatServer() as server:
        memory = ShortTermMemory(ChatCompletionsBackend(_client(server.url, NO_KEY)), model="llama3.2")
        stream(memory, "Hello!")
        assert server.requests[-1].headers["authorization"] == f"Bearer {NO_KEY}"


def test_slow_first_tokens_still_complete_the_turn(rig: Rig) -> None:
    memory = rig.memory()
    rig.server.queue(slow_start(0.5))
    deltas, turn = stream(memory, "Hello?")

    assert "".join(deltas) == rig.server.reply_text
    assert turn.committed and memory.history[-1].content == rig.server.reply_text


# -- faults ---------------------------------------------------------------------------------


def _prepared(rig: Rig) -> tuple[ShortTermMemory, tuple]:
    memory = rig.memory()
    stream(memory, "My name is Ana.")
    return memory, snapshot(memory)


def _assert_untouched(memory: ShortTermMemory, before: tuple, turn, error: BackendError, key: str, text: str) -> None:
    assert snapshot(memory) == before
    assert_complete_pairs(memory)
    assert not memory.conversation.pending
    assert turn.user_text == text and not turn.committed
    assert key not in str(error)


def test_mid_stream_disconnect_rolls_the_turn_back(rig: Rig) -> None:
    memory, before = _prepared(rig)
    rig.server.queue(cut_after(2))
    error, turn, seen = failed_turn(memory, "Tell me a story.")

    _assert_untouched(memory, before, turn, error, rig.key, "Tell me a story.")
    assert seen == list(rig.server.deltas[: len(seen)])
    # Whether the first deltas arrived before the break is up to the network; the message follows it.
    assert isinstance(error, ModelServerError) and error.kind == ("interrupted" if seen else "connection")


def test_a_stream_that_ends_without_its_final_event_is_not_saved(rig: Rig) -> None:
    memory, before = _prepared(rig)
    rig.server.queue(cut_after(1, cleanly=True))
    error, turn, _seen = failed_turn(memory, "Tell me a story.")

    _assert_untouched(memory, before, turn, error, rig.key, "Tell me a story.")
    assert isinstance(error, ModelServerError) and error.kind == "interrupted"
    assert "Nothing was saved" in str(error)


@pytest.mark.parametrize(
    ("behaviour", "kind", "words"),
    [
        (lambda key: status(401, f"Incorrect API key provided: {key}."), "auth", "HTTP 401"),
        (lambda key: status(429, "Rate limit reached for requests."), "rate_limit", "HTTP 429"),
        (lambda key: status(500, f"The server had an error (key {key})."), "server", "HTTP 500"),
        (lambda key: status(503, "Overloaded."), "server", "HTTP 503"),
        (lambda key: status(400, f"Invalid 'input' for key {key}."), "refused", "HTTP 400"),
    ],
    ids=["401", "429", "500", "503", "400"],
)
def test_http_errors_leave_the_memory_untouched(rig: Rig, behaviour: Callable, kind: str, words: str) -> None:
    memory, before = _prepared(rig)
    rig.server.queue(behaviour(rig.key))
    error, turn, seen = failed_turn(memory, "What does 'gato' mean?")

    _assert_untouched(memory, before, turn, error, rig.key, "What does 'gato' mean?")
    assert seen == []
    assert isinstance(error, ModelServerError) and error.kind == kind
    assert words in str(error)


def test_401_names_the_setting_to_check(rig: Rig) -> None:
    memory, _ = _prepared(rig)
    rig.server.queue(status(401, "bad key"))
    error, _, _ = failed_turn(memory, "Hi")
    expected = "OPENAI_API_KEY" if isinstance(rig.backend, OpenAIResponsesBackend) else "MEMORA_API_KEY"
    assert expected in str(error)


def test_a_timeout_leaves_the_memory_untouched(rig: Rig) -> None:
    memory, before = _prepared(rig)
    rig.backend.client = rig.backend.client.with_options(timeout=0.3)
    rig.server.queue(stall(3.0))
    error, turn, _ = failed_turn(memory, "Are you there?")

    _assert_untouched(memory, before, turn, error, rig.key, "Are you there?")
    assert isinstance(error, ModelServerError) and error.kind == "timeout"
    assert "MEMORA_TIMEOUT" in str(error)


def test_a_refused_connection_leaves_the_memory_untouched(rig: Rig) -> None:
    memory, before = _prepared(rig)
    rig.backend.client = rig.backend.client.with_options(base_url=f"http://127.0.0.1:{closed_port()}/v1")
    error, turn, _ = failed_turn(memory, "Hello again")

    _assert_untouched(memory, before, turn, error, rig.key, "Hello again")
    assert isinstance(error, ModelServerError) and error.kind == "connection"
    expected = "OPENAI_BASE_URL" if isinstance(rig.backend, OpenAIResponsesBackend) else "MEMORA_BASE_URL"
    assert expected in str(error)


def test_a_failed_summary_keeps_the_old_summary_and_pointer(rig: Rig) -> None:
    memory = rig.memory(max_recent_turns=1)
    stream(memory, "My name is Ana.")
    stream(memory, "My level is B1.")
    stream(memory, "I live in Taipei.")  # the first fold happens here
    assert memory.summarized_message_count == 2
    before = snapshot(memory)
    rig.server.queue(status(500, "summary failed"))
    error, turn, _ = failed_turn(memory, "I like cats.")

    _assert_untouched(memory, before, turn, error, rig.key, "I like cats.")
    assert memory.summary == rig.server.summary_text


def test_sdk_retries_a_500_when_allowed(rig: Rig) -> None:
    memory = rig.memory()
    rig.backend.client = rig.backend.client.with_options(max_retries=1)
    rig.server.queue(status(500, "flaky", headers={"retry-after-ms": "10"}))
    deltas, turn = stream(memory, "Hello!")

    assert turn.committed and "".join(deltas) == rig.server.reply_text
    assert len(rig.server.requests) == 2


def test_responses_failed_event_is_an_error() -> None:
    def failed(handler, request) -> None:
        handler.start_stream()
        error = {"code": "server_error", "message": "boom"}
        response = {"id": "resp_1", "object": "response", "status": "failed", "output": [], "error": error}
        handler.send_event({"type": "response.failed", "sequence_number": 0, "response": response}, "response.failed")
        handler.end_stream()

    with ResponsesServer() as server:
        memory = ShortTermMemory(OpenAIResponsesBackend(_client(server.url, OPENAI_KEY)))
        server.queue(failed)
        error, _turn, _ = failed_turn(memory, "Hi")

    assert "boom" in str(error) and memory.history == [] and memory.ledger == []


def test_responses_incomplete_event_keeps_the_text_received() -> None:
    def incomplete(handler, request) -> None:
        handler.start_stream()
        handler.send_event(
            {
                "type": "response.output_text.delta",
                "sequence_number": 0,
                "item_id": "m",
                "output_index": 0,
                "content_index": 0,
                "delta": "Half an ans",
                "logprobs": [],
            },
            "response.output_text.delta",
        )
        usage = {
            "input_tokens": 90,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 4,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 94,
        }
        response = {
            "id": "resp_1",
            "object": "response",
            "status": "incomplete",
            "output": [],
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": usage,
        }
        handler.send_event({"type": "response.incomplete", "sequence_number": 1, "response": response}, "response.incomplete")
        handler.end_stream()

    with ResponsesServer() as server:
        memory = ShortTermMemory(OpenAIResponsesBackend(_client(server.url, OPENAI_KEY)))
        server.queue(incomplete)
        stream(memory, "Hi")

    assert memory.history[-1] == Message("assistant", "Half an ans")
    assert (memory.ledger[-1].input_tokens, memory.ledger[-1].output_tokens) == (90, 4)


def test_chat_error_chunk_mid_stream_is_an_error_without_the_key() -> None:
    def error_chunk(handler, request) -> None:
        handler.start_stream()
        handler.send_event(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}],
            }
        )
        handler.send_event({"error": {"message": f"model crashed (key {CHAT_KEY})", "type": "server_error"}})
        handler.end_stream()

    with ChatServer() as server:
        memory = ShortTermMemory(ChatCompletionsBackend(_client(server.url, CHAT_KEY)), model="llama3.2")
        server.queue(error_chunk)
        error, turn, seen = failed_turn(memory, "Hi")

    assert seen == ["Hel"] and "model crashed" in str(error) and CHAT_KEY not in str(error)
    assert memory.history == [] and memory.ledger == [] and turn.user_text == "Hi"


# -- redaction in any form (issue 13) ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-REDTEAM-SECRET-123 here", "key [redacted] here"),
        ("upper SK-REDTEAM-SECRET-123", "upper [redacted]"),
        ("no prefix redteam-secret-123.", "no prefix [redacted]."),
        ("a run REDTEAM-SECR of twelve", "a run [redacted] of twelve"),
        ("eleven REDTEAM-SEC stays", "eleven REDTEAM-SEC stays"),
        ("Bearer anything-else", "Bearer [redacted]"),
    ],
)
def test_redact_finds_the_key_in_any_case_with_or_without_its_prefix_and_any_12_character_run(text, expected):
    from memora.backends.redaction import redact

    assert redact(text, ["sk-REDTEAM-SECRET-123"]) == expected


def test_redact_matches_a_short_secret_whole_in_any_case():
    from memora.backends.redaction import redact

    assert redact("pw AbCd1234 and abcd1234", ["abcd1234"]) == "pw [redacted] and [redacted]"
