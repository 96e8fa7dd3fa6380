import math

import pytest

from memora.backends import OfflineBackend
from memora.memory import ShortTermMemory
from memora.teaching.prices import (
    DEFAULT_PRICES,
    PRICES_CHECKED,
    ModelPrice,
    PriceTable,
    cost_summary,
    format_usd,
    ledger_cost_frame,
    request_cost,
)
from memora.text.usage import UsageRecord


def record(**changes) -> UsageRecord:
    values = dict(
        turn=1,
        kind="reply",
        model="gpt-5-mini",
        counted_input_tokens=1000,
        input_tokens=1000,
        output_tokens=500,
        total_tokens=1500,
        latency_s=0.1,
        full_history_tokens=4000,
    )
    values.update(changes)
    return UsageRecord(**values)


def test_table_is_dated_and_has_the_default_model():
    table = PriceTable()
    assert PRICES_CHECKED in table.note
    assert table.price_for("gpt-5-mini") == ModelPrice("gpt-5-mini", 0.25, 0.025, 2.00, DEFAULT_PRICES[0].source)
    assert table.price_for("GPT-5-mini-2025-08-07") is table.price_for("gpt-5-mini")
    assert table.price_for("my-local-llama") is None


def test_cost_splits_cached_input_and_prices_output():
    table = PriceTable([ModelPrice("m", input=2.0, cached_input=0.5, output=8.0)])
    input_cost, output_cost = request_cost(record(model="m", input_tokens=1_000_000, cached_tokens=400_000, output_tokens=250_000), table)
    assert input_cost == pytest.approx(600_000 * 2.0 / 1e6 + 400_000 * 0.5 / 1e6)
    assert output_cost == pytest.approx(2.0)


def test_unknown_model_and_bare_totals_get_no_price():
    table = PriceTable()
    assert request_cost(record(model="mystery"), table) is None
    assert request_cost(record(input_tokens=None, output_tokens=None), table) is None
    frame = ledger_cost_frame([record(model="mystery"), record()], table)
    assert math.isnan(frame.cost_usd[0]) and math.isnan(frame.full_history_cost_usd[0])
    assert frame.cost_usd[1] == pytest.approx((1000 * 0.25 + 500 * 2.0) / 1e6)
    assert frame.input_tokens[0] == 1000  # tokens stay visible when money does not


def test_saved_against_full_history_counts_summary_requests_as_spend():
    table = PriceTable([ModelPrice("m", 1.0, 0.1, 4.0)])
    records = [
        record(model="m", input_tokens=300, output_tokens=100, full_history_tokens=1000),
        record(model="m", kind="summary", input_tokens=200, output_tokens=50, full_history_tokens=None),
        record(model="unknown", input_tokens=300, output_tokens=100),
    ]
    summary = cost_summary(records, table)
    assert summary.full_history_usd == pytest.approx(1000 / 1e6)
    assert summary.saved_usd == pytest.approx((1000 - 300 - 200 - 50 * 4) / 1e6)
    assert summary.spent_usd == pytest.approx((300 + 400 + 200 + 200) / 1e6)
    assert summary.unpriced_models == ("unknown",) and summary.unpriced_requests == 1


def test_offline_ledger_shows_tokens_only():
    memory = ShortTermMemory(OfflineBackend(), max_recent_turns=1)
    for text in ["My name is Ana.", "I like tea.", "I live in Lisbon."]:
        with memory.turn(text) as turn:
            turn.run()
    assert memory.model == "gpt-5-mini"  # a priced name, yet nothing was billed
    frame = ledger_cost_frame(memory.ledger, offline=True)
    assert len(frame) == len(memory.ledger) and frame.cost_usd.isna().all()
    assert frame.total_tokens.sum() == memory.session_total_tokens
    assert cost_summary(memory.ledger, offline=True).saved_usd is None


def test_bad_prices_are_refused():
    with pytest.raises(ValueError):
        ModelPrice("m", -1, 0, 0)
    with pytest.raises(ValueError):
        ModelPrice("m", float("nan"), 0, 0)


def test_format_usd():
    assert format_usd(None) == "—"
    assert format_usd(float("nan")) == "—"
    assert format_usd(0.000123) == "$0.000123"
    assert format_usd(-1.5) == "-$1.5000"


def test_costs_of_a_real_session_follow_its_ledger():
    from tests.support.fakes import ScriptedBackend

    memory = ShortTermMemory(ScriptedBackend(), max_recent_turns=1)
    for text in ["My name is Ana.", "I like tea.", "I live in Lisbon.", "I study at night."]:
        with memory.turn(text) as turn:
            turn.run()
    price = PriceTable().price_for(memory.model)
    frame = ledger_cost_frame(memory.ledger)
    expected = [(r.input_tokens * price.input + r.output_tokens * price.output) / 1e6 for r in memory.ledger]
    assert frame.cost_usd.tolist() == pytest.approx(expected)
    summary = cost_summary(memory.ledger)
    assert summary.spent_usd == pytest.approx(sum(expected))
    replies = [r for r in memory.ledger if r.kind == "reply"]
    assert summary.full_history_usd == pytest.approx(sum(r.full_history_tokens for r in replies) * price.input / 1e6)
