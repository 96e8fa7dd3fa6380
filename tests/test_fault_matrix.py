"""The fault matrix: every step of a turn x every fault kind (docs/fault-matrix.md).

Steps: the API token count, the summary request inside ``prepare()`` (the fold),
the summary request of ``memory.prefold()`` between turns, the reply request
before its first token, and the reply mid-stream (after its first delta).

Kinds: an unexpected exception, Streamlit's StopException and RerunException
(BaseException subclasses; all three through ScriptedBackend), and a timeout,
HTTP 429, HTTP 500 and a refused connection, through the real SDK backends
against the local servers of ``benchmarks/harness/servers.py``. Once a stream has begun a
status code can no longer arrive, so mid-stream the HTTP kinds are what a server
sends then: a stall (timeout), the API's error event with ``rate_limit_exceeded``
or ``server_error``, and a dropped connection.

Every cell asserts the same things: the history is complete alternating pairs
and is what it was; summary and pointer moved together or not at all (a fold
that completed before the fault stays folded); the ledger equals what the
server or fake really billed, request for request (no record for a request
that failed before its usage was known); the user's text is on
``turn.user_text``; and resending the same text then works.
The page half of the matrix (text back in the input, a clear message) is in
tests/test_reliability_page.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import openai
import pytest

from benchmarks.harness.servers import ChatServer, ResponsesServer
from memora.backends.chat_completions import ChatCompletionsBackend
from memora.backends.openai_responses import OpenAIResponsesBackend
from memora.memory import ShortTermMemory
from tests.support.fakes import ScriptedBackend
from tests.support.faults import FAULTS, HTTP_KINDS, RAISED, SCRIPTED_KINDS, SCRIPTED_STEP, STEPS, arm_http, heal_http
from tests.support.memory import assert_consistent, stream

KEY = "sk-test-matrix-5e1d0b"


@dataclass
class Cell:
    """A memory two turns in, window 1, so that the next turn folds the first pair."""

    memory: ShortTermMemory
    billed: list[tuple[str, int]]
    arm: Callable[[], None]
    summary_text: Callable[[], str]
    heal: Callable[[], None] = lambda: None
    """Undoes what ``arm`` did to the client, so that the resend reaches the server."""


def _scripted_cell(step: str, kind: str) -> Iterator[Cell]:
    backend = ScriptedBackend(count_remotely=step == "count")
    memory = ShortTermMemory(backend, max_recent_turns=1)
    yield Cell(
        memory,
        backend.billed,
        arm=lambda: backend.fail_next(SCRIPTED_STEP[step], FAULTS[kind]),
        summary_text=lambda: " | ".join(m.content for m in memory.history[: memory.summarized_message_count]),
    )


def _http_cell(step: str, kind: str, api: str) -> Iterator[Cell]:
    server_class, backend_class = (ResponsesServer, OpenAIResponsesBackend) if api == "responses" else (ChatServer, ChatCompletionsBackend)
    with server_class(input_overhead=3) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.url, timeout=10.0, max_retries=0)
        backend = backend_class(client, count_remotely=True) if step == "count" else backend_class(client)
        memory = ShortTermMemory(backend, max_recent_turns=1)

        yield Cell(
            memory,
            server.billed,
            arm=lambda: arm_http(step, kind, server, backend, client),
            summary_text=lambda: server.summary_text,
            heal=lambda: heal_http(backend, client),
        )


CELLS = [(step, kind, "scripted") for step in STEPS for kind in SCRIPTED_KINDS] + [
    (step, kind, api) for step in STEPS for kind in HTTP_KINDS for api in ("responses", "chat") if not (step == "count" and api == "chat")
]


@pytest.fixture
def cell(request) -> Iterator[Cell]:
    step, kind, api = request.param
    yield from (_scripted_cell(step, kind) if api == "scripted" else _http_cell(step, kind, api))


def assert_ledger_is_what_was_billed(memory: ShortTermMemory, billed: list[tuple[str, int]]) -> None:
    assert [(r.kind, r.total_tokens) for r in memory.ledger] == billed
    assert memory.session_total_tokens == sum(total for _, total in billed)


@pytest.mark.parametrize("cell", CELLS, ids=["-".join(c) for c in CELLS], indirect=True)
def test_fault_matrix_cell(cell: Cell, request) -> None:
    step, kind, _ = request.node.callspec.params["cell"]
    memory = cell.memory
    stream(memory, "My name is Ana.")
    stream(memory, "My level is B1.")
    history = list(memory.history)
    assert memory.summarized_message_count == 0 and memory.plan().fold == 2

    cell.arm()
    if step == "prefold":
        with pytest.raises(RAISED[kind]):
            memory.prefold()
        user_text = None
    else:
        with pytest.raises(RAISED[kind]), memory.turn("I live in Taipei.") as turn:
            for _ in turn.stream():
                pass
        assert turn.user_text == "I live in Taipei." and not turn.committed
        user_text = turn.user_text

    # History: the same complete pairs; no dangling user message.
    assert memory.history == history and not memory.conversation.pending
    assert_consistent(memory)
    # Summary and pointer: a failed fold changes neither; a fold that completed before the fault stays.
    if step in ("fold", "prefold"):
        assert (memory.summary, memory.summarized_message_count, memory.conversation.versions) == ("", 0, ())
    else:
        assert memory.summarized_message_count == 2 and memory.summary == cell.summary_text()
        assert memory.conversation.versions[-1].folded == (0, 2)
    # Ledger: one record per request that completed, with what it really cost; none for the failed one.
    assert_ledger_is_what_was_billed(memory, cell.billed)
    expected_kinds = ["reply", "reply"] + ([] if step in ("fold", "prefold") else ["summary"])
    assert [r.kind for r in memory.ledger] == expected_kinds

    # Resending works from this state, and the books still balance.
    cell.heal()
    stream(memory, user_text or "I live in Taipei.")
    assert [m.content for m in memory.history][-2].startswith("I live in Taipei.")
    assert memory.summarized_message_count == 2
    assert_consistent(memory)
    assert_ledger_is_what_was_billed(memory, cell.billed)


def test_matrix_covers_every_step_and_kind() -> None:
    """The table in docs/fault-matrix.md counts these cells; keep both in step."""
    covered = {(step, kind) for step, kind, _ in CELLS}
    assert covered == {(step, kind) for step in STEPS for kind in (*SCRIPTED_KINDS, *HTTP_KINDS)}
    assert len(CELLS) == 5 * 3 + 5 * 4 * 2 - 4
