"""The ledger's frames: one row per request, and tokens per turn for the chart."""

import contextlib

import pandas as pd
import pytest

from memora import ShortTermMemory
from memora.app.page.frames import usage_per_turn
from memora.teaching.ledger import LEDGER_COLUMNS, ledger_csv, ledger_frame
from tests.support.memory import chat


def test_empty_ledger_gives_empty_frames_with_columns():
    assert list(ledger_frame([]).columns) == LEDGER_COLUMNS
    per_turn = usage_per_turn([])
    assert per_turn.empty and list(per_turn.columns) == ["reply_input", "reply_output", "summary", "full_history"]


def test_frames_follow_the_ledger(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "a", "b", "c")
    frame = ledger_frame(memory.ledger)
    assert list(frame.kind) == ["reply", "reply", "summary", "reply"]
    assert frame.total_tokens.sum() == memory.session_total_tokens
    per_turn = usage_per_turn(memory.ledger)
    assert list(per_turn.index) == [1, 2, 3]
    replies = [r for r in memory.ledger if r.kind == "reply"]
    assert list(per_turn.reply_input) == [r.input_tokens for r in replies]
    assert list(per_turn.reply_output) == [r.output_tokens for r in replies]
    assert list(per_turn.summary) == [0, 0, memory.ledger[2].total_tokens]
    assert list(per_turn.full_history) == [r.full_history_tokens for r in replies]


def test_turn_with_only_a_failed_reply_keeps_its_summary_spend(backend):
    memory = ShortTermMemory(backend, max_recent_turns=0)
    chat(memory, "a")
    backend.fail_next("reply")
    with contextlib.suppress(Exception):
        chat(memory, "b")
    per_turn = usage_per_turn(memory.ledger)
    assert list(per_turn.index) == [1, 2]
    assert per_turn.loc[2, "reply_input"] == 0 and per_turn.loc[2, "summary"] > 0


def test_the_ledger_total_is_the_sum_of_its_records_also_in_copies():
    import copy
    import pickle

    from memora.text.usage import Ledger, UsageRecord

    record = UsageRecord(1, "reply", "m", 10, 10, 5, 15, 0.0)
    ledger = Ledger([record, record])
    ledger.append(record)
    assert ledger.total == 45 == sum(r.total_tokens for r in ledger)
    assert copy.deepcopy(ledger).total == copy.copy(ledger).total == pickle.loads(pickle.dumps(ledger)).total == 45


def test_the_ledger_is_appended_to_only_so_its_total_never_falls_behind(backend):
    """``append`` is the one way in: a list's ``extend``, ``insert`` and ``+=`` are not there to bypass it."""
    from memora.memory import ShortTermMemory
    from tests.support.memory import chat

    memory = ShortTermMemory(backend, max_input_tokens=600, max_recent_turns=1)
    chat(memory, "My English level is B1.", "How do you pronounce 'comfortable'?", "Plan a practice for me.")
    ledger = memory.ledger
    assert ledger.total == sum(r.total_tokens for r in ledger) == memory.session_total_tokens > 0
    assert not hasattr(ledger, "extend") and not hasattr(ledger, "insert")
    with pytest.raises(TypeError):
        ledger += [ledger[0]]
    assert ledger == list(ledger) and ledger[:1] == [ledger[0]] and ledger.total == memory.session_total_tokens


def test_the_ledger_csv_neutralises_formulas_in_text_and_keeps_numbers_as_numbers():
    frame = pd.DataFrame({"turn": [1, -2], "model": ["-2", "gpt-5-mini"], "latency_s": [0.5, None], "cut": [True, False]})
    assert ledger_csv(frame).splitlines() == [
        '"turn","model","latency_s","cut"',
        '1,"\'-2",0.5,True',
        '-2,"gpt-5-mini","",False',
    ]
