"""Issue 39: reply retries never bill past a budget, as summary retries do not (tests/test_summary_retries.py).

Under a server cap the SDK's own retries of a reply are made by the guard instead, one booking per HTTP try, each
booked before it is sent: a try the server did not answer in time stays counted at its largest cost, since a
server bills an answer the client stopped waiting for. As the SDK does, a try is made again only when it failed
before its streamed answer began, so never once a delta could have reached the learner (the memory discards a
failed turn's partial text): a failure after that ends the turn as before.

Before, a reply whose first byte came after ``MEMORA_TIMEOUT`` was sent 3 times under one booking, which settled
at the counted input alone (75 tokens), while the server billed all three.
"""

from __future__ import annotations

import pytest

from benchmarks.harness.servers import ChatServer, ModelServer, ResponsesServer, slow_start, stall_after, status
from memora.classroom.server_budget import USAGE_DB_NAME, ServerLedger
from memora.memory.backend import BackendError
from tests.support.memory import chat, stream
from tests.support.retries import ANSWERED_AFTER_S, CHAT_ENV, TIMEOUT_S, classroom_memory, every_bill, ledger_rows

CAP = 4000
"""Room for the three tries of one reply and not for a fourth: each books about 1,300 tokens, its output cap (1,000)
and its input at 3.89 times the local count, since a local server's tokenizer is unknown."""
SERVERS: dict[str, tuple[type[ModelServer], dict[str, str]]] = {"responses": (ResponsesServer, {}), "chat": (ChatServer, CHAT_ENV)}


@pytest.mark.parametrize("api", SERVERS)
def test_a_slow_reply_with_the_sdks_retries_never_bills_past_the_cap(api: str, tmp_path) -> None:
    server_class, environ = SERVERS[api]
    with server_class() as server:
        for _ in range(3):
            server.queue_for("reply", slow_start(ANSWERED_AFTER_S))
        memory = classroom_memory(server.url, tmp_path, CAP, **environ)
        with pytest.raises(BackendError) as timed_out:
            chat(memory, "Hello, I am Ana and I am learning English.")
        bills = every_bill(server)
    assert memory.history == [], "the failed message was not kept as a turn"

    rows = ledger_rows(tmp_path)
    spent = ServerLedger(tmp_path / USAGE_DB_NAME, CAP).spent()
    assert sum(tokens for _, tokens in bills) <= spent <= CAP
    largest = rows[0][1]
    assert [kind for kind, _ in bills] == ["reply"] * 3, "the SDK's 2 retries, each booked"
    assert rows == [("reply", largest, True)] * 3, "each try unanswered: its largest cost, estimated"
    assert all(tokens < largest for _, tokens in bills), "each try is booked above what it cost"
    said = str(timed_out.value)
    assert said.startswith("The model server did not answer in time. Resend, or raise MEMORA_TIMEOUT.")
    counts = f"counts each at its largest cost ({largest:,} tokens)"
    assert f"The reply request went unanswered 3 time(s); the class's token budget {counts}" in said


def test_a_reply_try_the_budget_cannot_book_is_not_sent_and_the_turn_says_so(tmp_path) -> None:
    """Restarted with room for two tries and a half: the third is never sent, and the server bills two."""
    with ResponsesServer() as server:
        for _ in range(5):
            server.queue_for("reply", slow_start(ANSWERED_AFTER_S))
        with pytest.raises(BackendError):
            chat(classroom_memory(server.url, tmp_path, CAP), "Hello, I am Ana and I am learning English.")
        spent = ServerLedger(tmp_path / USAGE_DB_NAME, CAP).spent()
        largest = ledger_rows(tmp_path)[0][1]
        cap = spent + 2 * largest + largest // 2
        with pytest.raises(BackendError) as refused:
            chat(classroom_memory(server.url, tmp_path, cap), "Hello, I am Ana and I am learning English.")
        bills = every_bill(server)
    said = str(refused.value)
    assert said.startswith("The model server did not answer in time.")
    assert "The reply request went unanswered 2 time(s)" in said
    assert "Try 3 was not sent: the class's token budget has no room for it." in said
    assert [kind for kind, _ in bills] == ["reply"] * 5
    assert ledger_rows(tmp_path) == [("reply", largest, True)] * 5
    assert sum(tokens for _, tokens in bills) <= ServerLedger(tmp_path / USAGE_DB_NAME, cap).spent() <= cap


def test_a_reply_answered_after_a_slow_try_streams_once_and_books_each_try(tmp_path) -> None:
    """One try unanswered, the next answered: the learner sees one reply, the ledger one row per try."""
    with ResponsesServer() as server:
        server.queue_for("reply", slow_start(ANSWERED_AFTER_S))
        memory = classroom_memory(server.url, tmp_path, CAP)
        deltas, turn = stream(memory, "Hello, I am Ana.")
        bills = every_bill(server)
    assert deltas == list(server.deltas) and turn.committed
    assert [m.content for m in memory.history] == ["Hello, I am Ana.", server.reply_text]
    late, answered = ledger_rows(tmp_path)
    assert late[2] and late[1] > bills[0][1], "the unanswered try: its largest cost, estimated"
    assert answered == ("reply", bills[1][1], False), "the answered try: its bill"
    assert [record.total_tokens for record in memory.ledger] == [bills[1][1]], "the session's ledger: the reply it got"


def test_a_reply_refused_with_an_http_error_costs_nothing_and_is_retried_as_the_sdk_would(tmp_path) -> None:
    """A 500 is answered, so not billed: the try is booked at 0 and made again."""
    with ResponsesServer() as server:
        server.queue_for("reply", status(500, "overloaded"))
        memory = classroom_memory(server.url, tmp_path, CAP)
        chat(memory, "Hello, I am Ana.")
    assert [server.kind_of(r) for r in server.requests] == ["reply", "reply"]
    assert ledger_rows(tmp_path) == [("reply", 0, True), ("reply", server.billed[0][1], False)]
    assert memory.history[-1].content == server.reply_text


def test_a_reply_that_failed_after_its_first_delta_is_not_tried_again(tmp_path) -> None:
    """Text already reached the learner: the turn fails as before, once, booked at what the server may have written."""
    with ResponsesServer() as server:
        server.queue_for("reply", stall_after(1, 5.0))
        memory = classroom_memory(server.url, tmp_path, CAP)
        with pytest.raises(BackendError) as stalled, memory.turn("Hello, I am Ana.") as turn:
            received = []
            for delta in turn.stream():
                received.append(delta)
        assert len(server.requests) == 1, "never sent again"
    assert received == [server.deltas[0]] and memory.history == []
    assert "went unanswered" not in str(stalled.value)
    [(kind, tokens, estimated)] = ledger_rows(tmp_path)
    largest = memory.server.backend.largest_cost(turn.prepared.input_tokens, memory.model, memory.limits.max_reply_tokens)
    assert (kind, estimated) == ("reply", True) and tokens < largest, "the counted input and the text streamed"


@pytest.mark.parametrize("api", SERVERS)
def test_a_reply_whose_stream_began_is_not_tried_again_even_before_its_first_delta(api: str, tmp_path) -> None:
    """As the SDK: once the streamed answer began (its headers and first event came), a stall is not retried. It
    stays counted at its largest cost, since the server may still be writing the answer it began."""
    server_class, environ = SERVERS[api]
    with server_class() as server:
        server.queue_for("reply", stall_after(0, 5.0))
        memory = classroom_memory(server.url, tmp_path, CAP, **environ)
        with pytest.raises(BackendError) as stalled, memory.turn("Hello, I am Ana.") as turn:
            turn.run()
        assert len(server.requests) == 1, "never sent again"
    assert memory.history == []
    largest = memory.server.backend.largest_cost(turn.prepared.input_tokens, memory.model, memory.limits.max_reply_tokens)
    assert ledger_rows(tmp_path) == [("reply", largest, True)]
    said = str(stalled.value)
    assert said.startswith("The model server did not answer in time.") and "went unanswered 1 time(s)" in said


def test_the_page_says_what_each_slow_reply_try_cost(tmp_path, monkeypatch) -> None:
    """The page: a reply never answered in time, its three tries, the text back in the box and what was booked."""
    from tests.support.app import CLASSROOM_ENV, ENV_NAMES, new_app, send

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (*ENV_NAMES, *CLASSROOM_ENV):
        monkeypatch.delenv(name, raising=False)
    with ResponsesServer() as server:
        for _ in range(3):
            server.queue_for("reply", slow_start(ANSWERED_AFTER_S))
        environ = {
            "OPENAI_API_KEY": "sk-test-reply-retries",
            "OPENAI_BASE_URL": server.url,
            "MEMORA_TIMEOUT": str(TIMEOUT_S),
            "MEMORA_MAX_SERVER_TOKENS": str(CAP),
            "MEMORA_DATA_DIR": str(tmp_path / "data"),
            "MEMORA_MODEL": "gpt-4.1-mini",
            "MEMORA_LOCK_SETTINGS": "true",
        }
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        at = new_app()
        send(at, "Hello, I am Ana.")
        said = " ".join(error.value for error in at.error)
        assert said.startswith("Your message got no reply: The model request failed: The model server did not answer in time.")
        assert "The reply request went unanswered 3 time(s); the class's token budget counts each at its largest cost" in said
        assert at.chat_input[0].proto.value == "Hello, I am Ana.", "the text is back in the box"
        bills = every_bill(server)
    spent = ServerLedger(tmp_path / "data" / USAGE_DB_NAME, CAP).spent()
    assert [kind for kind, _ in bills] == ["reply"] * 3
    assert sum(tokens for _, tokens in bills) <= spent <= CAP
