"""Bounded requests and the server's count, with the faults a real server cannot be made to produce on demand.

tests/test_real_server.py runs the same promises against llama.cpp; here a
scripted backend makes each fault exact: a tokenizer that counts 14% more, a
proxy that reports impossibly low usage, a summary stopped at its cap.
"""

from __future__ import annotations

import itertools

import pytest

from memora.memory import MAX_REPLY_TOKENS, ContextBudgetError, ShortTermMemory, whole_sentences
from memora.memory.backend import CHAT_SERVER_PROFILE, BackendError, SummaryRequest
from memora.memory.core import last_reply, local_budget
from memora.text.calibration import LEARNED_SLACK, WORST_KNOWN_RATIO, Calibration, implausible
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE, SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter, clip_middle, count_text
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat


def summary_input(request) -> int:
    return LocalTokenCounter().count("", request.instructions, [Message("user", request.input_text)])


# -- where the summary goes ------------------------------------------------------


def test_a_chat_server_gets_one_system_message_carrying_instructions_and_summary():
    backend = ScriptedBackend(profile=CHAT_SERVER_PROFILE)
    memory = ShortTermMemory(backend, max_recent_turns=1)
    for text in ("My name is Ana.", "I am B1.", "How are you?"):
        chat(memory, text)

    request = backend.replies[-1]
    assert request.instructions == ""
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "user"]
    assert request.messages[0].content == SYSTEM_PROMPT.rstrip() + "\n\n" + SUMMARY_PREAMBLE + memory.summary
    assert memory.last_prepared.sources == ("instructions_summary", "window", "window", "current")
    assert memory.last_context[0].role == "system"
    # The count is of what was sent: the one system message, framed once.
    assert memory.last_prepared.input_tokens == LocalTokenCounter().count("", "", request.messages)


def test_before_any_summary_a_chat_server_gets_the_instructions_as_its_system_message():
    backend = ScriptedBackend(profile=CHAT_SERVER_PROFILE)
    memory = ShortTermMemory(backend)
    chat(memory, "Hello")
    assert backend.replies[0].messages[0] == Message("system", SYSTEM_PROMPT)
    assert memory.last_prepared.sources == ("instructions", "current")


def test_openai_keeps_the_articles_developer_message_and_separate_instructions(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    for text in ("My name is Ana.", "I am B1.", "How are you?"):
        chat(memory, text)
    assert backend.replies[-1].instructions == SYSTEM_PROMPT
    assert backend.replies[-1].messages[0] == Message("developer", SUMMARY_PREAMBLE + memory.summary)


# -- the reply cap --------------------------------------------------------------


def test_every_reply_request_carries_the_output_cap(backend):
    memory = ShortTermMemory(backend, max_reply_tokens=321)
    chat(memory, "Hi")
    assert backend.replies[0].max_output_tokens == 321
    assert ShortTermMemory(backend).limits.max_reply_tokens == MAX_REPLY_TOKENS


def test_a_reply_cut_at_its_cap_is_kept_and_marked_in_the_stats_and_the_ledger():
    backend = ScriptedBackend(cut_replies=True)
    memory = ShortTermMemory(backend)
    reply = chat(memory, "Write me a long story.")
    assert memory.history[-1] == Message("assistant", reply)
    assert last_reply(memory).cut and memory.ledger[-1].cut


def test_the_budget_and_the_largest_output_must_fit_the_context_window(backend):
    with pytest.raises(ValueError, match="context window of 1500"):
        ShortTermMemory(backend, max_input_tokens=1000, max_reply_tokens=600, context_window=1500)
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_reply_tokens=500, context_window=1500)
    with pytest.raises(ValueError, match="context window"):
        memory.configure(max_input_tokens=1200)
    assert memory.max_input_tokens == 1000


# -- summary requests fit the budget ------------------------------------------------


def test_a_pair_too_big_for_any_summary_request_is_clipped_with_a_marker_and_the_memory_moves_on(backend):
    budget = 1000
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=1)
    memory.add_user_message("Tell me a story.")
    memory.finish_turn("word " * 3000, [], response_tokens=3000)
    for text in ("One.", "Two.", "Three."):
        chat(memory, text)

    assert all(summary_input(request) <= budget for request in backend.summaries)
    clipped = backend.summaries[0].new_messages[1].content
    assert "tokens cut before summarizing" in clipped and clipped.startswith("word word")
    assert memory.conversation.versions[0].clipped == 1
    assert memory.history[1].content == "word " * 3000, "the history keeps the message whole"


def test_a_clipped_pair_keeps_the_users_fact_whole_and_cuts_the_reply(backend):
    diary = "I practised my English again today. " * 25
    fact = f"{diary}My name is Ana, I live in Porto and my goal is the TOEIC 900 by June. {diary}"
    assert count_text(fact) > 300, "longer than an even share of the summary request's room"
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=1)
    memory.add_user_message(fact)
    memory.finish_turn("word " * 3000, [], response_tokens=3000)
    for text in ("One.", "Two."):
        chat(memory, text)

    sent = backend.summaries[0].new_messages
    assert sent[0] == Message("user", fact), "the user's message reaches the summary request whole"
    assert "tokens cut before summarizing" in sent[1].content
    assert summary_input(backend.summaries[0]) <= 1000


def test_a_user_message_too_big_for_the_room_is_cut_too_and_the_request_still_fits(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=1)
    memory.add_user_message("Porto " * 3000)
    memory.finish_turn("A long text.", [], response_tokens=4)
    for text in ("One.", "Two."):
        chat(memory, text)

    sent = backend.summaries[0].new_messages
    assert "tokens cut before summarizing" in sent[0].content and sent[1].content == "A long text."
    assert summary_input(backend.summaries[0]) <= 1000


def test_many_pairs_leaving_at_once_fold_in_pieces_that_each_fit(backend):
    budget = 700
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=8)
    for turn in range(6):
        chat(memory, f"turn {turn} " + "apple " * 60)
    memory.configure(max_recent_turns=0)
    chat(memory, "Now fold everything.")

    assert len(backend.summaries) >= 2
    assert all(summary_input(request) <= budget for request in backend.summaries)
    ranges = [v.folded for v in memory.conversation.versions]
    assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert memory.summarized_message_count == ranges[-1][1] == 12


def test_a_failed_piece_keeps_the_pieces_before_it_and_the_turn_rolls_back():
    def second_piece_fails(request: SummaryRequest) -> str:
        if len(backend.summaries) == 2:
            raise BackendError("scripted failure")
        return request.new_messages[0].content[:20]

    backend = ScriptedBackend(summary_text=second_piece_fails)
    memory = ShortTermMemory(backend, max_input_tokens=700, max_recent_turns=8)
    for turn in range(6):
        chat(memory, f"turn {turn} " + "apple " * 60)
    memory.configure(max_recent_turns=0)

    with pytest.raises(BackendError, match="scripted failure"):
        chat(memory, "Now fold everything.")
    assert len(memory.conversation.versions) == 1
    assert memory.summarized_message_count == memory.conversation.versions[0].folded[1] > 0
    assert len(memory.history) == 12, "the user message was rolled back"


# -- cut summaries ---------------------------------------------------------------


def test_a_summary_cut_at_its_cap_is_trimmed_to_its_last_whole_sentence_and_marked():
    unfinished = "Ana is B1. She wants travel English. She is glad to hear that you"
    backend = ScriptedBackend(cut_summaries=True, summary_text=lambda r: unfinished)
    memory = ShortTermMemory(backend, max_recent_turns=0)
    chat(memory, "Hi")
    chat(memory, "Again")
    version = memory.conversation.versions[-1]
    assert version.text == "Ana is B1. She wants travel English."
    assert version.cut and memory.ledger[-2].kind == "summary" and memory.ledger[-2].cut


def test_a_summary_longer_than_the_cap_by_the_local_count_is_cut_too():
    long = " ".join(f"Fact {i} is here." for i in range(200))
    memory = ShortTermMemory(ScriptedBackend(summary_text=lambda r: long), max_recent_turns=0)
    chat(memory, "Hi")
    chat(memory, "Again")
    version = memory.conversation.versions[-1]
    assert version.cut and version.text.endswith("is here.")
    assert count_text(version.text) <= memory.limits.max_summary_tokens


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("One. Two. Thr", "One. Two."),
        ("Ana 是 B1。她想練習旅遊英語。她很", "Ana 是 B1。她想練習旅遊英語。"),
        ("- level B1\n- goal: travel\n- name: A", "- level B1\n- goal: travel"),
        ("no sentence end at all here", "no sentence end at all…"),
        ("word", "word…"),
        ("", ""),
    ],
)
def test_whole_sentences(text, kept):
    assert whole_sentences(text) == kept


def test_clip_middle_keeps_both_ends_within_the_limit():
    text = " ".join(f"w{i}" for i in range(1000))
    clipped = clip_middle(text, 100)
    assert count_text(clipped) <= 100
    assert clipped.startswith("w0 w1") and clipped.endswith("w999")
    assert clip_middle("short", 100) == "short"


# -- the server's count ------------------------------------------------------------


def test_an_unknown_tokenizer_is_planned_with_a_margin_until_the_server_reports():
    backend = ScriptedBackend(profile=CHAT_SERVER_PROFILE, input_scale=1.14)
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=0)
    assert local_budget(memory) == int(1000 / WORST_KNOWN_RATIO["latin"])  # English, before any count

    chat(memory, "Hi")
    assert memory.server.calibration.reports == 1  # the reply's reported usage
    (kind, ratio), *_ = memory.server.calibration.learned
    assert kind == "latin" and ratio == pytest.approx(1.14, abs=0.02)
    assert local_budget(memory) == int(1000 / (ratio * LEARNED_SLACK))


def test_with_a_tokenizer_that_counts_more_every_request_stays_in_budget_by_the_servers_count():
    budget = 800
    backend = ScriptedBackend(profile=CHAT_SERVER_PROFILE, input_scale=1.14)
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=3)
    for turn in range(12):
        chat(memory, f"Turn {turn}: " + "I practise English every day on the train. " * 6)
    billed = [record.input_tokens for record in memory.ledger]
    assert max(billed) <= budget
    assert not any(record.over_budget for record in memory.ledger)


def test_openai_stays_exact_whatever_it_reports(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000)
    chat(memory, "Hi")
    assert memory.server.calibration.exact and local_budget(memory) == 1000


def test_a_request_the_server_counts_over_the_budget_is_shown_as_over_with_both_figures():
    backend = ScriptedBackend(reported_input=1071)
    memory = ShortTermMemory(backend, max_input_tokens=1000)
    chat(memory, "Hi")
    record = memory.ledger[-1]
    assert record.over_budget and last_reply(memory).over_budget
    assert record.input_tokens == 1071 and record.input_budget == 1000 and record.counted_input_tokens < 1000
    # The page names the budget the request was planned for, also after the budget is changed.
    memory.configure(max_input_tokens=1200)
    assert last_reply(memory).input_budget == 1000


def test_implausibly_low_usage_is_flagged_and_teaches_nothing():
    backend = ScriptedBackend(profile=CHAT_SERVER_PROFILE, reported_input=21)
    memory = ShortTermMemory(backend)
    chat(memory, "Hi, I would like to practise travel English today, please.")
    record = memory.ledger[-1]
    assert record.implausible and not record.billed and not record.over_budget
    assert last_reply(memory).implausible
    assert memory.server.calibration.learned == ()


def test_calibration_values():
    unknown = Calibration(exact=False)
    learned = unknown.learn(100, 114).learn(100, 108)
    assert dict(learned.learned)["latin"] == pytest.approx(1.14) and learned.reports == 2
    assert learned.local_within(1000) == int(1000 / (1.14 * LEARNED_SLACK))
    assert Calibration().learn(100, 200) == Calibration()
    assert unknown.learn(100, 40) == unknown
    assert implausible(100, 49) and not implausible(100, 50) and not implausible(0, 0)


def test_a_message_too_big_by_the_servers_count_is_refused_with_the_servers_figure():
    memory = ShortTermMemory(ScriptedBackend(profile=CHAT_SERVER_PROFILE), max_input_tokens=1000)
    text = "word " * 760  # under 1,000 local tokens with the instructions, over them at the unknown-tokenizer margin
    with pytest.raises(ContextBudgetError) as refused:
        memory.plan(text)
    assert refused.value.input_tokens > 1000 and refused.value.max_input_tokens == 1000


def test_switching_backend_starts_the_new_servers_calibration_afresh():
    memory = ShortTermMemory(ScriptedBackend(profile=CHAT_SERVER_PROFILE, input_scale=1.2))
    chat(memory, "Hi")
    assert memory.server.calibration.learned != ()
    memory.configure(backend=ScriptedBackend(), model="gpt-5-mini")
    assert memory.server.calibration.exact and local_budget(memory) == memory.max_input_tokens
