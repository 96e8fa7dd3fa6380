"""Issue 39: summary retries never bill past a budget. Each HTTP attempt of a summary request, the SDK's retries
included, is booked at its largest cost before it is sent, and one that goes unanswered stays counted at it: a
server bills a request it answered after the client stopped waiting, and nothing says how much.

The issue's setup, scaled down: summaries answered slower than ``MEMORA_TIMEOUT`` by a real local Responses
server, through the real SDK, behind the page's own guarded backend and a server cap. Before, 18 summary requests
were billed under a 3,000-token cap and the ledger held them at 0.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.harness.servers import ResponsesServer, slow_start, status
from memora.classroom.server_budget import USAGE_DB_NAME, ServerLedger
from memora.memory import ShortTermMemory
from memora.memory.backend import BackendError
from tests.support.memory import chat
from tests.support.retries import ANSWERED_AFTER_S, TIMEOUT_S, every_bill, ledger_rows
from tests.support.retries import classroom_memory as budgeted_memory

CAP = 3000
PAGE_CAP = 3300
"""Room for the page's first reply (about 70 tokens), the three tries of the summary made ahead and one more try
of the next message's fold, not two: while a summary try books between 650 and 800 tokens (726 today)."""


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    with ResponsesServer() as running:
        for _ in range(20):
            running.queue_for("summary", slow_start(ANSWERED_AFTER_S))
        yield running


def classroom_memory(server_url: str, data_dir, **extra: str) -> ShortTermMemory:
    """The page's memory under ``CAP``, folding every turn after the first: each summary is the one before's."""
    return budgeted_memory(server_url, data_dir, CAP, **{"MEMORA_MAX_RECENT_TURNS": "0", **extra})


def test_slow_summaries_with_the_sdks_retries_never_bill_past_the_cap(server: ResponsesServer, tmp_path) -> None:
    memory = classroom_memory(server.url, tmp_path)
    chat(memory, "Hello, I am Ana and I am learning English.")
    with pytest.raises(BackendError) as timed_out:
        chat(memory, "I live in Porto.")
    assert len(memory.history) == 2, "the failed message was not kept as a turn"

    bills = every_bill(server)
    rows = ledger_rows(tmp_path)
    spent = ServerLedger(tmp_path / USAGE_DB_NAME, CAP).spent()
    assert sum(tokens for _, tokens in bills) <= spent <= CAP
    # The reply was answered: its row is its bill. Each summary try went unanswered: its row is its largest cost.
    largest = rows[1][1]
    assert rows == [("reply", bills[0][1], False)] + [("summary", largest, True)] * 3
    assert [kind for kind, _ in bills] == ["reply", "summary", "summary", "summary"], "the SDK's 2 retries, each booked"
    assert all(tokens < largest for _, tokens in bills[1:]), "each try is booked above what it cost"
    # What the turn says: the summary's three tries, unanswered, and what the budget counts for them.
    said = str(timed_out.value)
    assert said.startswith("The model server did not answer in time. Resend, or raise MEMORA_TIMEOUT.")
    assert f"went unanswered 3 time(s); the class's token budget counts each at its largest cost ({largest:,} tokens)" in said

    # Restarted with room for a short reply and two tries and a half: the third try is not sent, and the turn says so.
    cap = spent + bills[0][1] + 2 * largest + largest // 2
    again = classroom_memory(server.url, tmp_path, MEMORA_MAX_SERVER_TOKENS=str(cap))
    chat(again, "Hello, I am Ana and I am learning English!")
    with pytest.raises(BackendError) as refused:
        chat(again, "I live in Porto.")
    said = str(refused.value)
    assert "went unanswered 2 time(s)" in said and "Try 3 was not sent: the class's token budget has no room for it." in said

    bills = every_bill(server)
    spent = ServerLedger(tmp_path / USAGE_DB_NAME, cap).spent()
    assert sum(tokens for _, tokens in bills) <= spent <= cap
    assert [kind for kind, _ in bills[4:]] == ["reply", "summary", "summary"]
    assert ledger_rows(tmp_path)[4:] == [("reply", bills[4][1], False)] + [("summary", largest, True)] * 2


def test_a_summary_answered_in_time_after_a_retry_is_billed_once_per_try_and_settled_to_its_bill(tmp_path) -> None:
    """One slow try, then an answer: the late try stays at its largest cost, the answered one at its bill."""
    with ResponsesServer() as server:
        server.queue_for("summary", slow_start(ANSWERED_AFTER_S))
        memory = classroom_memory(server.url, tmp_path)
        chat(memory, "Hello, I am Ana.", "I live in Porto.")
        bills = every_bill(server)
    rows = ledger_rows(tmp_path)
    summary_bills = [tokens for kind, tokens in bills if kind == "summary"]
    summary_rows = [row for row in rows if row[0] == "summary"]
    assert len(summary_bills) == len(summary_rows) == 2
    late, answered = summary_rows
    assert late[2] and late[1] > summary_bills[0], "the unanswered try: its largest cost, estimated"
    assert answered == ("summary", summary_bills[1], False), "the answered try: its bill"
    assert memory.summary, "the retry's summary is the memory's"


def test_a_summary_refused_with_an_http_error_costs_nothing_and_is_retried_as_the_sdk_would(tmp_path) -> None:
    """A 500 is answered, so not billed; a 400 is not retried. Neither stays booked."""
    with ResponsesServer() as server:
        server.queue_for("summary", status(500, "overloaded"))
        server.queue_for("summary", status(400, "bad request"))
        memory = classroom_memory(server.url, tmp_path)
        chat(memory, "Hello, I am Ana.")
        with pytest.raises(BackendError, match=r"HTTP 400") as failed:
            chat(memory, "I live in Porto.")
    assert "went unanswered" not in str(failed.value)
    assert [server.kind_of(r) for r in server.requests] == ["reply", "summary", "summary"]
    assert [row[:2] for row in ledger_rows(tmp_path) if row[0] == "summary"] == [("summary", 0), ("summary", 0)]


def test_a_server_out_of_reach_is_retried_but_nothing_stays_booked(tmp_path) -> None:
    """A connection refused never reached a server: no bill is possible, so the budget keeps nothing of it."""
    with ResponsesServer() as server:
        memory = classroom_memory(server.url, tmp_path)
        chat(memory, "Hello, I am Ana.")
    # The server is stopped: its port refuses connections now, as a server that is down does.
    with pytest.raises(BackendError, match=r"Could not connect") as failed:
        chat(memory, "I live in Porto.")
    assert "went unanswered" not in str(failed.value)
    summaries = [row for row in ledger_rows(tmp_path) if row[0] == "summary"]
    assert [tokens for _, tokens, _ in summaries] == [0, 0, 0], "three tries, none reached a server"


def test_the_page_says_what_each_slow_summary_sent_and_that_a_try_was_not_sent(tmp_path, monkeypatch) -> None:
    """The issue's page: the summary made ahead after a reply, then the next message's own fold, under one cap."""
    from tests.support.app import CLASSROOM_ENV, ENV_NAMES, new_app, send

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (*ENV_NAMES, *CLASSROOM_ENV):
        monkeypatch.delenv(name, raising=False)
    with ResponsesServer() as server:
        for _ in range(6):
            server.queue_for("summary", slow_start(ANSWERED_AFTER_S))
        environ = {
            "OPENAI_API_KEY": "sk-test-summary-retries",
            "OPENAI_BASE_URL": server.url,
            "MEMORA_TIMEOUT": str(TIMEOUT_S),
            "MEMORA_MAX_SERVER_TOKENS": str(PAGE_CAP),
            "MEMORA_DATA_DIR": str(tmp_path / "data"),
            "MEMORA_MODEL": "gpt-4.1-mini",
            "MEMORA_MAX_RECENT_TURNS": "0",
            "MEMORA_LOCK_SETTINGS": "true",
        }
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        at = new_app()
        send(at, "Hello, I am Ana.")
        ahead = " ".join(warning.value for warning in at.warning)
        assert "The summary request went unanswered 3 time(s); the class's token budget counts each" in ahead
        send(at, "I live in Porto.")
        refused = at.error[0].value
        assert refused.startswith("Your message got no reply") and "went unanswered 1 time(s)" in refused
        assert "Try 2 was not sent: the class's token budget has no room for it." in refused
        assert at.chat_input[0].proto.value == "I live in Porto.", "the text is back in the box"
        bills = every_bill(server)
    spent = ServerLedger(tmp_path / "data" / USAGE_DB_NAME, PAGE_CAP).spent()
    assert [kind for kind, _ in bills] == ["reply"] + ["summary"] * 4
    assert sum(tokens for _, tokens in bills) <= spent <= PAGE_CAP
