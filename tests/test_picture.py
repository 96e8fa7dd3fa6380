"""The picture of a request against the budget: its parts add up to what the request counted, for every turn."""

from __future__ import annotations

from memora.app.page.picture import next_picture, next_plan, picture_budget, picture_caption, plan_caption, sent_picture, turn_picture
from memora.memory import ShortTermMemory
from memora.teaching.story import story
from tests.support.memory import chat


def test_each_turns_picture_rebuilt_from_the_ledger_is_the_request_it_sent(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000)
    sent = []
    for turn in range(1, 9):
        chat(memory, f"Turn {turn}: how do you pronounce 'comfortable'? " + "word " * 20)
        sent.append(sent_picture(memory.last_prepared, picture_budget(memory), row="turn"))
        memory.prefold()
    told = story(memory)
    for account, picture in zip(told.turns, sent, strict=True):
        assert picture.used == account.record.counted_input_tokens
        assert turn_picture(memory, told, account.record, picture_budget(memory)) == picture
    last = sent[-1]
    assert last.summary > 0 and last.window > 0
    assert last.current == memory.conversation.counts[-2] and last.free == 1000 - last.used
    assert sent[0].summary == 0 and sent[0].window == 0, "the first request sends the instructions and the message alone"
    assert picture_caption(last, "en").endswith(f"{last.used:,} of 1,000 used, {last.free:,} free")


def test_the_next_requests_picture_is_the_plan_of_the_fold_ahead(backend):
    memory = ShortTermMemory(backend, max_input_tokens=1000, max_recent_turns=2)
    chat(memory, *(f"Question {n}: " + "word " * 30 for n in range(3)))
    plan = next_plan(memory)
    assert plan is not None and plan.fold == 2 and plan.reason == "window"
    picture = next_picture(memory, plan)
    assert picture.used == plan.input_tokens and picture.budget == plan.budget
    assert plan_caption(memory, plan, "en").startswith("Next request: messages 1–2 fold first, because the recent window holds 2 turns")
    memory.prefold()
    after = next_plan(memory)
    assert after is not None and after.fold == 0
    assert plan_caption(memory, after, "en").startswith("Next request: nothing more to fold first")
