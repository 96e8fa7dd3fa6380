"""The page teaches the article's lesson by default, and shows what the other policy would have done (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memora.app.build import build_memory
from memora.app.page import state as keys
from memora.app.page.i18n import t
from memora.app.settings import FOLD_POLICIES, Settings, load_settings
from memora.memory import ShortTermMemory
from memora.memory.core import full_history_tokens
from memora.teaching.what_if import what_if
from tests.support.app import expander, new_app, send, texts

pytestmark = pytest.mark.usefixtures("no_secrets")

SCENARIO = json.loads((Path(__file__).resolve().parents[1] / "memora/teaching/scenarios/article-b1-travel.json").read_text())
SIX_SHORT_TURNS = [*SCENARIO["plant"], *SCENARIO["filler"][:5]]
WHAT_IF = "What if: the other policy, or the full history"


@pytest.fixture
def defaults(monkeypatch):
    """Nothing configured: the page and the REPL on their own defaults (no_secrets sets the window explicitly)."""
    monkeypatch.delenv("MEMORA_FOLD_POLICY", raising=False)


def test_the_page_and_the_repl_default_to_the_articles_window(defaults, backend):
    assert Settings().fold_policy == load_settings(environ={}).fold_policy == "window"
    assert build_memory(load_settings(environ={}), backend=backend).limits.fold_policy == "window"  # what memora.app.repl builds
    assert FOLD_POLICIES[0] == "window", "the page's radio lists the default first"
    assert load_settings(environ={"MEMORA_FOLD_POLICY": "watermark"}).fold_policy == "watermark"


def test_offline_with_the_defaults_the_articles_b1_check_passes_after_six_short_turns(defaults):
    at = new_app()
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    assert memory.server.backend.offline and memory.limits.fold_policy == "window"
    for text in SIX_SHORT_TURNS:
        at = send(at, text)
    assert len(memory.history) == 12
    assert "B1" in memory.summary, memory.summary
    assert memory.last_prepared is not None
    assert len(memory.last_prepared.context_messages) < len(memory.history)
    assert memory.last_prepared.input_tokens < full_history_tokens(memory)
    assert "Fold policy: window" in texts(at)


def test_the_watermark_is_one_click_away_in_the_status_panel_with_what_it_saves(defaults):
    at = new_app()
    status = expander(at, "Status")
    radio = next(r for r in status.radio if r.key == keys.FOLD_POLICY_INPUT)
    assert radio.value == "window" and radio.options == ["Window (the article's rule)", "Watermark (fewer summaries)"]
    # Each option's caption: what the window teaches, what the watermark saves (qualitative; What if shows it on yours).
    assert list(radio.proto.captions) == [t("en", "policy.window_caption"), t("en", "policy.watermark_caption")]
    radio.set_value("watermark").run()
    assert at.session_state[keys.MEMORY].limits.fold_policy == "watermark" and "Fold policy: watermark" in texts(at)


def test_the_what_if_panel_is_drawn_when_opened_as_one_table_whose_first_column_is_the_ledger(defaults):
    at = new_app()
    for text in SIX_SHORT_TURNS:
        at = send(at, text)
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    requests = len(memory.ledger)
    assert not expander(at, WHAT_IF).get("arrow_table"), "drawn only once opened"
    at.session_state[keys.WHAT_IF_PANEL_OPEN] = True
    at.run()
    panel = expander(at, WHAT_IF)
    (drawn,) = panel.table  # one table, not one per strategy
    table = drawn.value
    assert list(table.columns) == ["Window (yours: the ledger)", "Watermark (estimate)", "Full history"]
    assert table.index.name == "Figure"
    # Yours is the ledger: every request of it, its summaries, their counted input and what they wrote.
    yours = table["Window (yours: the ledger)"].to_dict()
    replies = [r for r in memory.ledger if r.kind == "reply"]
    summaries = [r for r in memory.ledger if r.kind == "summary"]
    assert summaries, "six turns fold under the default window: the summary rows must mean something"
    sent = sum(r.counted_input_tokens for r in memory.ledger)
    written = sum(r.output_tokens for r in summaries)
    assert yours == {
        "Reply requests": f"{len(replies):,}",
        "Summary requests": f"{len(summaries):,}",
        "Counted input, replies": f"{sum(r.counted_input_tokens for r in replies):,}",
        "Counted input, summaries": f"{sum(r.counted_input_tokens for r in summaries):,}",
        "Summary output": f"{written:,}",
        "Total tokens": f"{sent + written:,}",
        "Replies over budget": "0",
        "$": "tokens only",  # offline: no price
    }
    assert table.loc["Summary requests", "Full history"] == "0"
    full = sum(r.full_history_tokens for r in replies)
    assert table.loc["Counted input, replies", "Full history"] == table.loc["Total tokens", "Full history"] == f"{full:,}"
    caption = texts(at)
    assert "column is the ledger itself" in caption and "counted input" in caption and "no model call" in caption
    assert len(memory.ledger) == requests, "the replay sent nothing"
    # Kept per history length: a rerun with no new turn replays nothing again.
    cached = at.session_state[keys.WHAT_IF]
    at.run()
    assert at.session_state[keys.WHAT_IF] is cached


def test_the_usage_chart_draws_the_other_policys_replay_beside_the_bars(defaults):
    at = new_app()
    for text in SIX_SHORT_TURNS[:4]:
        at = send(at, text)
    at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.run()
    usage = expander(at, "Token usage")
    assert usage.get("vega_lite_chart")
    assert "dashed line is a replay estimate of what the Watermark policy" in texts(at)


def test_the_what_if_panel_speaks_the_pages_language(defaults):
    at = new_app()
    at = send(at, SIX_SHORT_TURNS[0])
    at.radio(key=keys.LANG).set_value("zh-TW").run()
    at.session_state[keys.WHAT_IF_PANEL_OPEN] = True
    at.run()
    (drawn,) = expander(at, "如果換一種做法：另一種策略，或送出完整對話紀錄").table
    table = drawn.value
    assert list(table.columns) == ["視窗（你的：帳本）", "水位線（估計）", "完整對話紀錄"] and table.index.name == "項目"
    assert table.index[0] == "回覆請求數" and "計算的輸入：回覆" in table.index


def test_what_if_prices_a_priced_model_and_leaves_the_memory_as_it_was(backend):
    memory = ShortTermMemory(backend, model="gpt-5-mini", max_recent_turns=1)
    from tests.support.memory import chat

    chat(memory, *SIX_SHORT_TURNS)
    before = (list(memory.history), list(memory.ledger), list(memory.conversation.versions))
    comparison = what_if(memory)
    assert (list(memory.history), list(memory.ledger), list(memory.conversation.versions)) == before
    assert comparison.model == "gpt-5-mini" and comparison.turns == 6
    full = comparison.column("full_history")
    assert full.usd == pytest.approx(full.input_tokens * 0.25 / 1_000_000)
    yours = comparison.live
    assert yours.from_ledger and yours.usd == pytest.approx(
        (sum(r.counted_input_tokens for r in memory.ledger) * 0.25 + yours.summaries_written * 2.0) / 1_000_000
    )
    other = comparison.column("watermark")
    assert comparison.other.strategy == "watermark" and not other.from_ledger and other.estimated is (other.summary_requests > 0)
    assert comparison.other_cap == memory.limits.max_summary_tokens == 200, "both policies cap the summary alike"
