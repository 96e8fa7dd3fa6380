"""The server-wide budget is a reservation: many sessions at once, in threads and in another process, never pass the cap.

Each session is a real memory behind ``GuardedBackend`` and a recording fake backend; the ledger is a
real SQLite file or a real PostgreSQL table (in a schema of its own, so the shared test database is
never touched). The figure reported in the closing note is ``over``: the ledger's total past the cap.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading

import pytest

from memora.classroom.guard import FOREIGN_TOKENIZER_CEILING, GuardedBackend
from memora.classroom.server_budget import HELD, ServerBudgetReached, ServerBudgetUnavailable, ServerLedger, Standing
from memora.memory.backend import ReplyRequest
from memora.text.calibration import WORST_KNOWN_RATIO
from memora.text.messages import Message
from tests.support.budget import Outcomes, isolated_postgres_url, ledger_for, second_process, send_at_once
from tests.support.fakes import ScriptedBackend
from tests.support.stores import STORE_KINDS, require_postgres_url

THREAD_SESSIONS = 10
PROCESS_SESSIONS = 5


def ledger_spec(kind: str, tmp_path) -> str:
    return f"sqlite:{tmp_path / 'usage.sqlite3'}" if kind == "sqlite" else isolated_postgres_url(require_postgres_url())


def crowd(spec: str, cap: int, tmp_path) -> tuple[Outcomes, Outcomes]:
    """``THREAD_SESSIONS`` sessions in this process and ``PROCESS_SESSIONS`` in another, released together."""
    go, out = tmp_path / "go", tmp_path / "second.json"
    barrier = threading.Barrier(THREAD_SESSIONS + 1)
    here: list[Outcomes] = []
    runner = threading.Thread(target=lambda: here.append(send_at_once(ledger_for(spec, cap), THREAD_SESSIONS, barrier)))
    with second_process(spec, cap, PROCESS_SESSIONS, go, out) as process:
        runner.start()
        barrier.wait()  # every thread session is at the gate
        go.touch()  # and the other process's are released with them
        runner.join()
    assert process.returncode == 0
    return here[0], Outcomes(**json.loads(out.read_text()))


def prespend(spec: str, cap: int, tokens: int) -> None:
    ledger = ledger_for(spec, cap)
    ledger.settle(ledger.reserve(tokens, "reply"), tokens)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_fifteen_sessions_at_once_against_a_budget_one_token_short_spend_nothing_over_it(kind, tmp_path) -> None:
    cap = 50_000
    spec = ledger_spec(kind, tmp_path)
    prespend(spec, cap, cap - 1)
    here, there = crowd(spec, cap, tmp_path)
    assert (here.failed, there.failed) == ([], [])
    assert (here.sent, there.sent) == (0, 0), "no request fits in one token"
    assert (here.refused, there.refused) == (THREAD_SESSIONS, PROCESS_SESSIONS)
    assert (here.billed, there.billed) == (0, 0), "nothing reached the model"
    standing = ledger_for(spec, cap).standing()
    assert standing == Standing(cap - 1, 0, 0, cap)
    over = max(0, standing.spent + standing.reserved - cap)
    assert over == 0


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_sessions_at_once_book_only_what_is_left_and_the_ledger_holds_every_bill(kind, tmp_path) -> None:
    # Room for a few bookings, not for all fifteen: those that fit go through, the rest are refused before sending.
    cap = 2_000
    spec = ledger_spec(kind, tmp_path)
    prespend(spec, cap, 1_500)
    here, there = crowd(spec, cap, tmp_path)
    assert (here.failed, there.failed) == ([], [])
    sent = here.sent + there.sent
    assert 1 <= sent < THREAD_SESSIONS + PROCESS_SESSIONS
    assert here.sent + here.refused == THREAD_SESSIONS and there.sent + there.refused == PROCESS_SESSIONS
    standing = ledger_for(spec, cap).standing()
    assert standing.reserved == 0, "every booking settled"
    assert standing.spent == 1_500 + here.billed + there.billed, "each bill as the server reported it"
    assert standing.spent <= cap, f"{standing.spent - cap} tokens over the cap"


def test_a_booking_is_the_largest_cost_and_settles_to_the_bill(tmp_path) -> None:
    ledger = ServerLedger(tmp_path / "usage.sqlite3", 10_000)
    backend = ScriptedBackend()
    guarded = GuardedBackend(backend, server_ledger=ledger)
    request = ReplyRequest("gpt-4.1-mini", "Be brief.", (Message("user", "Hi"),), counted_input_tokens=40, max_output_tokens=300)
    stream = guarded.stream_reply(request)
    assert next(stream) == "reply "
    assert ledger.standing() == Standing(0, 40 + 300, 0, 10_000), "input plus the output cap, while the reply streams"
    list(stream)
    assert ledger.standing() == Standing(backend.billed[0][1], 0, 0, 10_000)
    # A server with another tokenizer may bill more per local token: the booking allows for the worst measured ratio.
    foreign = GuardedBackend(ScriptedBackend(profile=backend.profile.__class__(counts_like_o200k=False)), server_ledger=ledger)
    assert max(WORST_KNOWN_RATIO.values()) == FOREIGN_TOKENIZER_CEILING
    assert foreign.largest_cost(40, "m", 300) == math.ceil(40 * FOREIGN_TOKENIZER_CEILING) + 300


def test_a_reasoning_model_books_its_thinking_allowance_too(tmp_path) -> None:
    from memora.backends.openai_responses import REASONING_ALLOWANCE, OpenAIResponsesBackend

    guarded = GuardedBackend(OpenAIResponsesBackend(client=None), server_ledger=ServerLedger(tmp_path / "u.sqlite3", 10))  # type: ignore[arg-type]
    assert guarded.largest_cost(100, "gpt-5-mini", 300) == 100 + 300 + REASONING_ALLOWANCE
    assert guarded.largest_cost(100, "gpt-4.1-mini", 300) == 100 + 300


def test_an_uncapped_reply_is_capped_so_that_its_booking_holds(tmp_path) -> None:
    from memora.memory import MAX_REPLY_TOKENS

    backend = ScriptedBackend()
    guarded = GuardedBackend(backend, server_ledger=ServerLedger(tmp_path / "usage.sqlite3", 10_000))
    list(guarded.stream_reply(ReplyRequest("gpt-4.1-mini", "", (Message("user", "Hi"),), counted_input_tokens=10)))
    assert backend.replies[0].max_output_tokens == MAX_REPLY_TOKENS


def test_a_request_larger_than_the_whole_budget_is_refused_before_it_is_sent(tmp_path) -> None:
    backend = ScriptedBackend()
    guarded = GuardedBackend(backend, server_ledger=ServerLedger(tmp_path / "usage.sqlite3", 100))
    with pytest.raises(ServerBudgetReached) as refused:
        request = ReplyRequest("gpt-4.1-mini", "", (Message("user", "Hi"),), counted_input_tokens=10, max_output_tokens=200)
        next(guarded.stream_reply(request))
    assert backend.replies == [] and refused.value.value == 0 and refused.value.limit == 100


def _book_and_die(path: str) -> None:
    ledger = ServerLedger(__import__("pathlib").Path(path), 1_000)
    ledger.reserve(700, "reply")
    os._exit(0)  # a crash mid-request: the booking is never settled


def test_a_booking_left_by_a_crashed_process_stays_counted_at_its_largest_cost(tmp_path) -> None:
    path = tmp_path / "usage.sqlite3"
    process = multiprocessing.get_context("spawn").Process(target=_book_and_die, args=(str(path),))
    process.start()
    process.join()
    ledger = ServerLedger(path, 1_000)
    assert ledger.standing() == Standing(0, 700, 0, 1_000)
    with pytest.raises(ServerBudgetReached):
        ledger.reserve(301, "reply")
    ledger.settle(ledger.reserve(300, "reply"), 120)
    assert ledger.standing() == Standing(120, 700, 0, 1_000)


def test_a_ledger_made_before_bookings_migrates_in_place(tmp_path) -> None:
    path = tmp_path / "usage.sqlite3"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE requests (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL, "
            "tokens INTEGER NOT NULL, estimated INTEGER NOT NULL)"
        )
        rows = [("reply", 400), ("summary", 100)]
        old.executemany("INSERT INTO requests (at, kind, tokens, estimated) VALUES ('2026-01-01', ?, ?, 0)", rows)
    old.close()
    ledger = ServerLedger(path, 1_000)
    assert ledger.standing() == Standing(500, 0, 0, 1_000), "the old rows are settled spend"
    ledger.settle(ledger.reserve(200, "reply"), 150)
    assert ledger.spent() == 650


def test_a_postgres_ledger_made_before_bookings_migrates_in_place(postgres_url) -> None:
    import psycopg

    from memora.classroom.postgres_ledger import PostgresServerLedger

    url = isolated_postgres_url(postgres_url)
    with psycopg.connect(url, autocommit=True) as old:
        old.execute(
            "CREATE TABLE memora_server_requests (id BIGSERIAL PRIMARY KEY, at TIMESTAMPTZ NOT NULL, kind TEXT NOT NULL, "
            "tokens INTEGER NOT NULL, estimated BOOLEAN NOT NULL)"
        )
        old.execute("INSERT INTO memora_server_requests (at, kind, tokens, estimated) VALUES (now(), 'reply', 400, FALSE)")
    ledger = PostgresServerLedger(url, 1_000)
    assert ledger.standing() == Standing(400, 0, 0, 1_000)
    ledger.settle(ledger.reserve(500, "reply"), 90)
    assert ledger.standing() == Standing(490, 0, 0, 1_000)


def test_a_settlement_the_store_cannot_take_is_held_counted_logged_once_and_written_later(tmp_path, caplog) -> None:
    # A folder that refuses writes, by a real file system permission: a read-only bind would need root,
    # and tests/test_storage_faults.py does that with a real tmpfs. Here the file is swapped for a directory.
    path = tmp_path / "usage.sqlite3"
    ledger = ServerLedger(path, 10_000)
    first, second = ledger.reserve(500, "reply"), ledger.reserve(500, "summary")
    moved = tmp_path / "moved.sqlite3"
    path.rename(moved)
    path.mkdir()  # sqlite cannot open a directory: every call fails as a vanished disk would
    caplog.set_level("INFO", logger="memora.classroom.server_budget")
    assert ledger.settle(first, 321) is False
    assert ledger.settle(second, 79, estimated=True) is False
    assert ledger.unsaved() == 400
    with pytest.raises(ServerBudgetUnavailable):
        ledger.reserve(10, "reply")
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "321 tokens" in warnings[0].getMessage()
    path.rmdir()
    moved.rename(path)
    assert ledger.standing() == Standing(400, 0, 0, 10_000)
    assert ledger.unsaved() == 0 and HELD.pending(ledger.place) == ()
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT SUM(tokens), MIN(settled) FROM requests").fetchone() == (400, 1)


def test_two_processes_keep_one_total_through_the_module_entry_point(tmp_path) -> None:
    # The second process of the crowd tests, run alone: its sessions and this one's share the file.
    spec = f"sqlite:{tmp_path / 'usage.sqlite3'}"
    go, out = tmp_path / "go", tmp_path / "out.json"
    go.touch()
    subprocess.run([sys.executable, "-m", "tests.support.budget", spec, "100000", "3", str(go), str(out)], check=True, cwd=os.getcwd())
    outcomes = Outcomes(**json.loads(out.read_text()))
    assert outcomes.sent == 3 and ledger_for(spec, 100_000).spent() == outcomes.billed


def test_a_budget_file_deleted_for_a_new_term_starts_again_while_the_server_runs(tmp_path) -> None:
    ledger = ServerLedger(tmp_path / "usage.sqlite3", 1_000)
    ledger.settle(ledger.reserve(900, "reply"), 900)
    (tmp_path / "usage.sqlite3").unlink()
    ledger.settle(ledger.reserve(900, "reply"), 10)
    assert ledger.standing() == Standing(10, 0, 0, 1_000)
