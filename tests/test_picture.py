"""The picture of a request against the budget: read off the request's record, the parts adding up to what it counted."""

from __future__ import annotations

from memora.app.page.picture import next_picture, next_plan, picture_caption, plan_caption, request_picture
from memora.memory import ShortTermMemory
from memora.memory.core import last_sent, local_budget
from memora.teaching.story import story
from tests.support.memory import chat


def test_each_turns_picture_is_the_record_of_the_request_it_sent(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000)
    sent = []
    for turn in range(1, 9):
        chat(memory, f"Turn {turn}: how do you pronounce 'comfortable'? " + "word " * 20)
        assert memory.last_prepared is not None and last_sent(memory) == memory.last_prepared.parts
        sent.append(request_picture(memory.last_prepared.parts, row="turn"))
        memory.prefold()
    told = story(memory)
    for account, picture in zip(told.turns, sent, strict=True):
        assert account.record.parts is not None
        assert picture.used == account.record.counted_input_tokens
        assert request_picture(account.record.parts, row="turn") == picture
    last = sent[-1]
    assert last.summary > 0 and last.window > 0
    assert last.current == memory.conversation.counts[-2] and last.free == 1000 - last.used
    assert sent[0].summary == 0 and sent[0].window == 0, "the first request sends the instructions and the message alone"
    assert picture_caption(last, "en").endswith(f"{last.used:,} of 1,000 used, {last.free:,} free")


def test_an_old_turns_picture_keeps_the_budget_it_was_checked_against(backend):
    memory = ShortTermMemory(backend, max_input_tokens=2000)
    chat(memory, "How do you pronounce 'comfortable'?")
    memory.configure(max_input_tokens=1000)
    chat(memory, "And 'vegetable'?")
    first, second = (account.record for account in story(memory).turns)
    assert first.parts is not None and second.parts is not None
    assert (first.parts.budget, first.input_budget) == (2000, 2000)
    assert (second.parts.budget, second.input_budget) == (local_budget(memory), 1000)
    assert request_picture(first.parts).budget == 2000, "yesterday's request is drawn against yesterday's budget"


def test_the_next_requests_picture_is_the_plan_of_the_fold_ahead(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=2)
    chat(memory, *(f"Question {n}: " + "word " * 30 for n in range(3)))
    plan = next_plan(memory)
    assert plan is not None and plan.fold == 2 and plan.reason == "window"
    picture = next_picture(plan)
    assert (picture.instructions, picture.summary, picture.window, picture.current) == (plan.fixed, plan.summary, plan.window, plan.message)
    assert picture.used == plan.input_tokens and picture.budget == plan.budget
    caption = plan_caption(memory, plan, "en")
    assert caption.startswith("Your next message: messages 1–2 are folded into the summary first, because the recent window holds 2 turns")
    assert caption.endswith("the summary, messages 3–6 word for word, and your message.")
    memory.prefold()
    after = next_plan(memory)
    assert after is not None and after.fold == 0
    assert plan_caption(memory, after, "en").startswith("Your next message: nothing is folded first")
