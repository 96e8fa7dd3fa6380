"""The fold policies: the article's window, and the watermark that folds less often in larger steps."""

from __future__ import annotations

import pytest

from memora.memory import ShortTermMemory
from memora.memory.planner import (
    HIGH_WATER_TOKENS,
    LOW_WATER_SHARE,
    expected_message,
    plan_context,
    plan_folds,
    plan_watermark,
    watermarks,
)
from memora.messages import Message
from memora.settings import Settings, build_memory, load_settings
from memora.tokens import LocalTokenCounter, count_message
from tests.fakes import ScriptedBackend

SIZES = {"message": 20, "fixed": 80, "summary": 0, "full_summary": 240}


def test_the_watermark_folds_nothing_while_the_request_fits_the_budget():
    plan = plan_watermark([100] * 12, **SIZES, budget=1500, max_recent_turns=3, high_water=1500, low_water=900)
    assert (plan.fold, plan.reason) == (0, "none")
    # The article's window would fold the six messages beyond three pairs.
    assert plan_context([100] * 12, **SIZES, budget=1500, max_recent_turns=3).fold == 6


def test_past_the_budget_the_watermark_folds_down_to_the_low_water_mark_keeping_the_window():
    plan = plan_watermark([100] * 12, **SIZES, budget=1000, max_recent_turns=1, high_water=1000, low_water=600)
    # 80 + 240 + 20 + kept messages <= 600 leaves 2 messages: exactly the one-pair window.
    assert (plan.fold, plan.reason) == (10, "high_water")
    assert plan.input_tokens == 80 + 240 + 20 + 200 <= 600


def test_the_window_stays_verbatim_even_above_the_low_water_mark_unless_the_budget_needs_it():
    kept = plan_watermark([100] * 12, **SIZES, budget=1000, max_recent_turns=3, high_water=1000, low_water=600)
    assert kept.fold == 6 and kept.input_tokens == 940 > 600
    forced = plan_watermark([300] * 12, **SIZES, budget=1000, max_recent_turns=3, high_water=1000, low_water=600)
    assert forced.fold == 10 and forced.fits


def test_the_high_water_mark_is_a_thousand_tokens_raised_for_a_big_window_and_never_above_the_budget():
    assert watermarks(4000, kept=500) == (HIGH_WATER_TOKENS, int(HIGH_WATER_TOKENS * LOW_WATER_SHARE))
    room = int(HIGH_WATER_TOKENS * (1 - LOW_WATER_SHARE))
    assert watermarks(4000, kept=1500) == (1500 + room, int((1500 + room) * LOW_WATER_SHARE))
    assert watermarks(800, kept=500) == (800, int(800 * LOW_WATER_SHARE))


def test_a_roomy_budget_folds_at_the_high_water_mark_not_at_the_budget():
    plan = plan_folds("watermark", [100] * 12, **SIZES, budget=4000, max_recent_turns=1)
    assert plan.reason == "high_water" and plan.budget == 4000
    assert plan.input_tokens <= int(HIGH_WATER_TOKENS * LOW_WATER_SHARE)


def test_the_watermark_prefold_plans_for_a_message_as_long_as_the_longest_recent_one():
    assert expected_message("watermark", [12, 40, 7]) == 40
    assert expected_message("window", [12, 40, 7]) == count_message("user", "")


def chat(memory: ShortTermMemory, text: str) -> None:
    with memory.turn(text) as turn:
        turn.run()


def test_the_watermark_policy_summarizes_less_and_every_request_fits_the_budget():
    requests = {}
    for policy in ("window", "watermark"):
        backend = ScriptedBackend()
        memory = ShortTermMemory(backend, max_input_tokens=1000, fold_policy=policy)
        for turn in range(40):
            chat(memory, f"Turn {turn}: I practise English on the train every morning before work.")
            memory.prefold()
        local = LocalTokenCounter()
        assert all(local.count("", r.instructions, r.messages) <= 1000 for r in backend.replies)
        requests[policy] = len(backend.summaries)
    assert requests["watermark"] * 3 < requests["window"]


def test_the_watermark_keeps_the_window_verbatim_after_a_fold(backend):
    memory = ShortTermMemory(backend, max_input_tokens=600, max_recent_turns=2, fold_policy="watermark")
    for turn in range(12):
        chat(memory, f"message {turn} " + "word " * 40)
    assert memory.summary_versions, "the budget was passed, so something was folded"
    assert memory.last_fold_plan is not None and memory.last_fold_plan.reason == "high_water"
    assert len(backend.replies[-1].messages) >= 2 * 2 + 2  # summary, two whole pairs, the message
    # Above the low-water mark only because the two-pair window is never folded for it.
    assert memory.last_fold_plan.input_tokens > int(memory.local_budget() * LOW_WATER_SHARE)


def test_the_page_and_the_repl_default_to_the_watermark_and_the_articles_constructor_to_the_window(backend):
    assert load_settings(environ={}).fold_policy == "watermark"
    assert build_memory(Settings(), backend=backend).fold_policy == "watermark"
    assert ShortTermMemory(backend).fold_policy == "window"
    assert load_settings(environ={"MEMORA_FOLD_POLICY": "window"}).fold_policy == "window"


def test_a_bad_fold_policy_names_the_variable():
    with pytest.raises(ValueError, match="MEMORA_FOLD_POLICY"):
        load_settings(environ={"MEMORA_FOLD_POLICY": "sometimes"})


def test_the_status_panel_says_which_policy_is_on_and_why_the_last_fold_happened(backend):
    from memora.ui.views import fold_note

    memory = ShortTermMemory(backend, max_input_tokens=600, max_recent_turns=1, fold_policy="watermark")
    assert "watermark" in fold_note(memory, "en") and "Nothing has been folded yet" in fold_note(memory, "en")
    for turn in range(10):
        chat(memory, f"message {turn} " + "word " * 40)
    assert "would have passed the high-water mark" in fold_note(memory, "en")
    memory.update_limits(fold_policy="window")
    assert "the article's rule" in fold_note(memory, "en")
    assert "水位線" in fold_note(ShortTermMemory(backend, fold_policy="watermark"), "zh-TW")


def test_the_history_is_never_lost_by_a_policy_switch_mid_conversation(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000, fold_policy="watermark")
    for turn in range(6):
        chat(memory, f"turn {turn}")
    memory.update_limits(fold_policy="window")
    chat(memory, "after the switch")
    assert [m.content for m in memory.history[::2]] == [f"turn {n}" for n in range(6)] + ["after the switch"]
    # Back on the window: three pairs stay verbatim before the last one, the older three are folded.
    assert memory.summarized_message_count == len(memory.history) - 2 - 6 == 6
    assert Message("user", "after the switch") == backend.replies[-1].messages[-1]


def test_the_page_opens_on_the_watermark_policy_and_its_setting_switches_it(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from tests.helpers.app import APP, ENV_NAMES, texts

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (*ENV_NAMES, "MEMORA_FOLD_POLICY"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(APP, default_timeout=30).run()
    memory = at.session_state["memory"]
    assert memory.fold_policy == "watermark" and "Fold policy: watermark" in texts(at)
    radio = next(r for r in at.radio if r.label == "Fold policy")
    radio.set_value("window").run()
    assert memory.fold_policy == "window" and "Fold policy: window" in texts(at)
