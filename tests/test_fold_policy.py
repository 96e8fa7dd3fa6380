"""The fold policies: the article's window, and the watermark that folds less often in larger steps."""

from __future__ import annotations

import pytest

from memora.app.build import build_memory
from memora.app.settings import Settings, load_settings
from memora.memory import ShortTermMemory, policies
from memora.memory.plan import PlanSizes, plan_turn
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INSTRUCTIONS, summary_word_limit
from memora.text.tokens import LocalTokenCounter, count_message
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat

WINDOW, WATERMARK = policies.policy("window"), policies.policy("watermark")


def plan(policy, unfolded, *, budget, max_recent_turns, message=20):
    """``plan_turn`` with the sizes these tests weigh: 80 fixed tokens, no summary yet, 240 for a full one."""
    sizes = PlanSizes(fixed=80, full_summary=240, fold_room=10_000, budget=budget)
    return plan_turn(unfolded, message=message, summary=0, sizes=sizes, policy=policy, max_recent_turns=max_recent_turns)


def test_the_watermark_folds_nothing_while_the_request_fits_the_budget():
    # 80 fixed + 12 messages of 100 + a message of 20 = 1,300: within the budget of 1,500, so nothing folds.
    kept = plan(WATERMARK, [100] * 12, budget=1500, max_recent_turns=3)
    assert (kept.fold, kept.reason, kept.input_tokens) == (0, "none", 1300)
    # The article's window would fold the six messages beyond three pairs.
    assert plan(WINDOW, [100] * 12, budget=1500, max_recent_turns=3).fold == 6


def test_past_the_budget_every_pair_older_than_the_window_is_folded_at_once():
    # 80 + 40 messages of 100 + 20 = 4,100 > 4,000: all but the last pair go, down to the low-water mark:
    # 80 fixed + 240 for a full summary + the recent pair's 200 + the message's 20 = 540.
    folded = plan(WATERMARK, [100] * 40, budget=4000, max_recent_turns=1)
    assert (folded.fold, folded.reason, folded.input_tokens) == (38, "high_water", 540)
    assert plan(WATERMARK, [100] * 38, budget=4000, max_recent_turns=1).fold == 0  # 3,900 fits


def test_window_pairs_are_folded_only_when_they_do_not_fit_beside_the_message():
    kept = plan(WATERMARK, [100] * 12, budget=1000, max_recent_turns=3)
    assert (kept.fold, kept.input_tokens) == (6, 940)
    forced = plan(WATERMARK, [300] * 12, budget=1000, max_recent_turns=3)
    assert (forced.fold, forced.reason) == (10, "budget") and forced.fits


def test_a_larger_budget_keeps_more_turns_verbatim():
    # The same conversation: at 2,000 tokens the watermark has folded it, at 4,000 it still sends every turn.
    assert plan(WATERMARK, [100] * 30, budget=2000, max_recent_turns=1).fold == 28
    assert plan(WATERMARK, [100] * 30, budget=4000, max_recent_turns=1).fold == 0


def test_the_watermark_prefold_plans_for_the_median_recent_message():
    assert WATERMARK.expected_message([12, 40, 7]) == 12
    assert WINDOW.expected_message([12, 40, 7]) == count_message("user", "")


def test_a_prefold_takes_window_pairs_only_when_even_the_shortest_message_needs_them_gone():
    expected = plan(WATERMARK, [300] * 8, budget=1000, max_recent_turns=3, message=300)
    shortest = plan(WATERMARK, [300] * 8, budget=1000, max_recent_turns=3)
    assert (expected.fold, shortest.fold) == (8, 6)
    assert WATERMARK.certain_fold(expected.fold, shortest.fold, older=2) == 6
    assert WINDOW.certain_fold(expected.fold, shortest.fold, older=2) == 8


def test_both_policies_cap_the_summary_at_max_summary_tokens():
    for policy in ("watermark", "window"):
        backend = ScriptedBackend()
        memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=1, fold_policy=policy)
        for turn in range(30):
            chat(memory, f"message {turn} " + "word " * 60)
        request = backend.summaries[-1]
        assert (request.max_output_tokens, request.instructions) == (200, SUMMARY_INSTRUCTIONS)


def test_the_summary_instructions_ask_for_the_words_that_fit_the_cap(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=1, fold_policy="watermark", max_summary_tokens=60)
    for turn in range(24):
        chat(memory, f"message {turn} " + "word " * 60)
    request = backend.summaries[-1]
    assert (request.max_output_tokens, summary_word_limit(request.instructions)) == (60, 45)
    assert request.instructions == SUMMARY_INSTRUCTIONS.replace("under 150 words", "under 45 words")
    article = ShortTermMemory(ScriptedBackend(), max_input_tokens=1000, max_recent_turns=1)
    for turn in range(12):
        chat(article, f"message {turn} " + "word " * 60)
    assert article.server.backend.summaries[-1].instructions == SUMMARY_INSTRUCTIONS


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
    assert memory.conversation.versions, "the budget was passed, so something was folded"
    assert memory.conversation.fold_plan is not None and memory.conversation.fold_plan.reason == "high_water"
    assert len(backend.replies[-1].messages) >= 2 * 2 + 2  # summary, two whole pairs, the message


def test_the_page_the_repl_and_the_articles_constructor_all_default_to_the_window(backend):
    assert load_settings(environ={}).fold_policy == "window"
    assert build_memory(Settings(), backend=backend).limits.fold_policy == "window"
    assert ShortTermMemory(backend).limits.fold_policy == "window"
    assert load_settings(environ={"MEMORA_FOLD_POLICY": "watermark"}).fold_policy == "watermark"
    assert build_memory(Settings(fold_policy="watermark"), backend=backend).limits.fold_policy == "watermark"


def test_a_bad_fold_policy_names_the_variable():
    with pytest.raises(ValueError, match="MEMORA_FOLD_POLICY"):
        load_settings(environ={"MEMORA_FOLD_POLICY": "sometimes"})


def test_the_status_panel_says_which_policy_is_on_and_why_the_last_fold_happened(backend):
    from memora.app.page.views import fold_note

    memory = ShortTermMemory(backend, max_input_tokens=600, max_recent_turns=1, fold_policy="watermark")
    assert "watermark" in fold_note(memory, "en") and "Nothing has been folded yet" in fold_note(memory, "en")
    for turn in range(10):
        chat(memory, f"message {turn} " + "word " * 40)
    assert "would have passed the high-water mark" in fold_note(memory, "en")
    memory.configure(fold_policy="window")
    assert "the article's rule" in fold_note(memory, "en")
    assert "水位線" in fold_note(ShortTermMemory(backend, fold_policy="watermark"), "zh-TW")


def test_the_history_is_never_lost_by_a_policy_switch_mid_conversation(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000, fold_policy="watermark")
    for turn in range(6):
        chat(memory, f"turn {turn}")
    memory.configure(fold_policy="window")
    chat(memory, "after the switch")
    assert [m.content for m in memory.history[::2]] == [f"turn {n}" for n in range(6)] + ["after the switch"]
    # Back on the window: three pairs stay verbatim before the last one, the older three are folded.
    assert memory.summarized_message_count == len(memory.history) - 2 - 6 == 6
    assert Message("user", "after the switch") == backend.replies[-1].messages[-1]


def test_the_page_opens_on_the_configured_watermark_and_its_setting_switches_it(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from tests.support.app import APP, ENV_NAMES, texts

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORA_FOLD_POLICY", "watermark")  # the window is the default (tests/test_page_lesson.py)
    at = AppTest.from_file(APP, default_timeout=30).run()
    memory = at.session_state["memory"]
    assert memory.limits.fold_policy == "watermark" and "Fold policy: watermark" in texts(at)
    radio = next(r for r in at.radio if r.label == "Fold policy")
    radio.set_value("window").run()
    assert memory.limits.fold_policy == "window" and "Fold policy: window" in texts(at)
