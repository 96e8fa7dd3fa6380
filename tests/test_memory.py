"""ShortTermMemory: the article's API, folding, budget, transactions and the ledger."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memora import ContextBudgetError, Message, ShortTermMemory
from memora.memory import MAX_SUMMARY_TOKENS, SummaryError
from memora.memory.backend import BackendError
from memora.memory.core import full_history_tokens, last_reply, minimum_budget
from memora.text.prompts import SUMMARY_INSTRUCTIONS, SUMMARY_PREAMBLE, SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter, count_text
from tests.support.fakes import ScriptedBackend
from tests.support.memory import assert_consistent, chat


class FakeStop(BaseException):
    """Stands in for Streamlit's StopException / RerunException (BaseException subclasses)."""


def test_defaults_are_the_articles(backend):
    memory = ShortTermMemory(backend)
    assert memory.model == "gpt-5-mini"
    assert memory.max_input_tokens == 1000
    assert memory.max_recent_turns == 3
    assert memory.system_prompt == SYSTEM_PROMPT
    assert memory.summary_instructions == SUMMARY_INSTRUCTIONS
    assert (memory.history, memory.summary, memory.summarized_message_count, memory.last_context) == ([], "", 0, [])
    assert memory.get_status() == {
        "History messages": 0,
        "Summarized messages": 0,
        "Last context messages": 0,
        "Summary available": False,
        "Session total tokens": 0,
    }


def test_article_step_by_step_api(backend):
    memory = ShortTermMemory(backend, "gpt-5-mini", SYSTEM_PROMPT, SUMMARY_INSTRUCTIONS, 1000, 3)
    memory.add_user_message("Hello")
    stats = memory.prepare_context()
    assert set(stats) == {"context_messages", "input_tokens", "summary_token_usage", "newly_summarized_count"}
    assert stats["context_messages"] == [{"role": "user", "content": "Hello"}]
    assert stats["input_tokens"] == LocalTokenCounter().count("m", SYSTEM_PROMPT, [Message("user", "Hello")])
    memory.finish_turn("Hi!", stats["context_messages"], 42)
    assert memory.history == [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]
    assert memory.last_context == [{"role": "user", "content": "Hello"}]
    assert memory.session_total_tokens == 42
    record = memory.ledger[-1]
    assert (record.kind, record.total_tokens, record.input_tokens, record.output_tokens) == ("reply", 42, None, None)


def test_prepare_context_requires_a_pending_user_message(backend):
    memory = ShortTermMemory(backend)
    with pytest.raises(ValueError, match="empty"):
        memory.prepare_context()
    chat(memory, "one")
    with pytest.raises(ValueError, match="user message"):
        memory.prepare_context()


def test_context_is_summary_then_window_then_current(backend):
    memory = ShortTermMemory(backend, max_recent_turns=2)
    chat(memory, "a", "b", "c")
    with memory.turn("d") as turn:
        turn.run()
    sent = backend.replies[-1].messages
    assert sent[0].role == "developer"
    assert sent[0].content == SUMMARY_PREAMBLE + "a | reply 1"
    assert [m.content for m in sent[1:]] == ["b", "reply 2", "c", "reply 3", "d"]
    assert turn.prepared.sources == ("summary", "window", "window", "window", "window", "current")
    assert backend.replies[-1].instructions == SYSTEM_PROMPT


def test_window_keeps_last_turns_and_folds_each_pair_once(backend):
    memory = ShortTermMemory(backend, max_recent_turns=3)
    chat(memory, *[f"message {i}" for i in range(1, 7)])
    folded = [m for request in backend.summaries for m in request.new_messages]
    assert folded == memory.history[: memory.summarized_message_count]
    assert memory.summarized_message_count == 4  # 5 completed pairs at turn 6, 3 kept
    assert [len(r.new_messages) for r in backend.summaries] == [2, 2]
    assert backend.summaries[1].existing_summary == memory.conversation.versions[0].text
    assert_consistent(memory)


def test_pairs_leaving_together_fold_in_one_request(backend):
    memory = ShortTermMemory(backend, max_recent_turns=3)
    chat(memory, "a", "b", "c", "d", "e")
    assert len(backend.summaries) == 1
    memory.configure(max_recent_turns=0)
    with memory.turn("f") as turn:
        turn.run()
    assert len(backend.summaries) == 2, "four pairs leave at once: one summary request"
    assert [m.content for m in backend.summaries[1].new_messages] == [*("b", "reply 2", "c", "reply 3", "d", "reply 4", "e", "reply 5")]
    assert turn.prepared.newly_summarized_count == 8
    assert [m.role for m in backend.replies[-1].messages] == ["developer", "user"]


def test_budget_folds_oldest_pairs_in_one_request():
    backend = ScriptedBackend(summary_text=lambda request: "short summary")
    memory = ShortTermMemory(backend, max_input_tokens=900, max_recent_turns=10)
    long_text = "travel " * 300
    chat(memory, long_text, long_text, long_text)
    counter = LocalTokenCounter()
    for request in backend.replies:
        assert counter.count(request.model, request.instructions, request.messages) <= 900
    assert memory.summarized_message_count > 0
    assert all(len(r.new_messages) % 2 == 0 for r in backend.summaries)
    assert len(backend.summaries) <= 2, "at most one summary request per turn"
    assert_consistent(memory)


def test_summary_is_bounded_by_max_summary_tokens():
    backend = ScriptedBackend(summary_text=lambda request: "fact " * 1000)
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "a", "b", "c")
    assert {r.max_output_tokens for r in backend.summaries} == {MAX_SUMMARY_TOKENS}
    assert count_text(memory.summary) <= MAX_SUMMARY_TOKENS
    assert LocalTokenCounter().count("m", SYSTEM_PROMPT, backend.replies[-1].messages) <= memory.max_input_tokens


def test_message_alone_over_budget_fails_before_any_request(backend):
    memory = ShortTermMemory(backend)
    chat(memory, "hello")
    with pytest.raises(ContextBudgetError) as caught, memory.turn("word " * 2000) as turn:
        turn.run()
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.max_input_tokens == 1000
    assert error.input_tokens > 2000
    assert str(error.input_tokens) in str(error) and "1000" in str(error)
    assert turn.user_text == "word " * 2000
    assert (len(backend.replies), len(backend.summaries)) == (1, 0)
    assert [m.content for m in memory.history] == ["hello", "reply 1"]


def test_summary_plus_message_over_budget_names_both_figures():
    backend = ScriptedBackend(summary_text=lambda request: "fact " * 190)
    memory = ShortTermMemory(backend, max_recent_turns=0)
    chat(memory, "a")
    near_limit = "word " * (1000 - minimum_budget(memory) + 150)
    with pytest.raises(ContextBudgetError) as caught:
        chat(memory, near_limit)
    assert caught.value.input_tokens > 1000 == caught.value.max_input_tokens
    assert_consistent(memory)


def test_failed_summary_keeps_the_old_summary_and_the_users_text(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "a", "b", "c")
    summary, pointer, ledger = memory.summary, memory.summarized_message_count, list(memory.ledger)
    backend.fail_next("summary")
    with pytest.raises(BackendError), memory.turn("d") as turn:
        turn.run()
    assert (memory.summary, memory.summarized_message_count, memory.ledger) == (summary, pointer, ledger)
    assert turn.user_text == "d"
    assert len(memory.history) == 6
    assert_consistent(memory)


def test_empty_summary_from_the_model_is_refused():
    backend = ScriptedBackend(summary_text=lambda request: "   ")
    memory = ShortTermMemory(backend, max_recent_turns=0)
    chat(memory, "a")
    with pytest.raises(SummaryError):
        chat(memory, "b")
    assert (memory.summary, memory.summarized_message_count) == ("", 0)
    assert_consistent(memory)


@pytest.mark.parametrize("step", ["count", "summary", "reply", "reply_midstream"])
@pytest.mark.parametrize("fault", [lambda: BackendError("down"), lambda: TimeoutError("slow"), lambda: FakeStop()])
def test_any_failure_at_any_step_leaves_the_memory_consistent(backend, step, fault):
    backend.count_remotely = True
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "a", "b")
    before = [m.content for m in memory.history]
    backend.fail_next(step, fault)
    expected = type(fault())
    with pytest.raises(expected), memory.turn("c") as turn:
        for _ in turn.stream():
            pass
    assert turn.user_text == "c"
    assert [m.content for m in memory.history] == before
    assert not turn.committed
    assert_consistent(memory)
    chat(memory, "c")  # the next attempt works from the same state
    assert [m.content for m in memory.history][-2:] == ["c", f"reply {len(backend.replies)}"]
    assert_consistent(memory)


def test_abandoned_stream_commits_nothing(backend):
    memory = ShortTermMemory(backend)
    with memory.turn("hello") as turn:
        stream = turn.stream()
        assert next(stream) == "reply "
        stream.close()
    assert memory.history == [] and memory.ledger == [] and not turn.committed


def test_empty_and_double_messages_are_refused(backend):
    memory = ShortTermMemory(backend)
    for text in ["", "   \n\t"]:
        with pytest.raises(ValueError, match="empty"), memory.turn(text):
            pass
    memory.add_user_message("first")
    with pytest.raises(ValueError, match="already waiting"):
        memory.add_user_message("second")
    memory.rollback_last_user_message()
    memory.rollback_last_user_message()  # nothing pending: no-op
    assert memory.history == []


def test_ledger_has_one_record_per_request(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "a", "b", "c")
    assert [(r.turn, r.kind) for r in memory.ledger] == [(1, "reply"), (2, "reply"), (3, "summary"), (3, "reply")]
    reply = memory.ledger[-1]
    assert reply.counted_input_tokens == reply.input_tokens  # the fake bills what o200k counts
    sent_everything = LocalTokenCounter().count(reply.model, SYSTEM_PROMPT, memory.history[:-1])
    assert reply.full_history_tokens == sent_everything
    assert memory.ledger[2].full_history_tokens is None
    assert memory.session_total_tokens == sum(r.total_tokens for r in memory.ledger)
    assert last_reply(memory).summary_tokens == memory.ledger[2].total_tokens
    assert last_reply(memory).newly_summarized == 2


def test_api_counting_mode_asks_the_backend(backend):
    backend.count_remotely = True
    memory = ShortTermMemory(backend)
    chat(memory, "hello")
    assert backend.counts == [(SYSTEM_PROMPT, (Message("user", "hello"),))]


def test_limits_are_validated_and_applied_live(backend):
    memory = ShortTermMemory(backend)
    for bad in [0, -1, 100]:
        with pytest.raises(ValueError, match="max_input_tokens must be at least"):
            memory.configure(max_input_tokens=bad)
    with pytest.raises(ValueError, match="max_recent_turns"):
        memory.configure(max_recent_turns=-1)
    assert (memory.max_input_tokens, memory.max_recent_turns) == (1000, 3)
    with pytest.raises(ValueError):
        ShortTermMemory(backend, max_input_tokens=10)
    memory.configure(max_input_tokens=2000, max_recent_turns=1)
    assert (memory.max_input_tokens, memory.max_recent_turns) == (2000, 1)


def test_the_memory_takes_a_backend_as_it_is_and_wraps_the_articles_openai_client():
    import openai

    from memora.backends.openai_responses import OpenAIResponsesBackend

    client = openai.OpenAI(api_key="sk-test-not-real", base_url="http://127.0.0.1:9")
    wrapped = OpenAIResponsesBackend(client)
    assert ShortTermMemory(wrapped).server.backend is wrapped
    memory = ShortTermMemory(client)
    assert isinstance(memory.server.backend, OpenAIResponsesBackend) and memory.server.backend.client is client
    assert not hasattr(memory, "client")
    with pytest.raises(TypeError, match="not object"):
        ShortTermMemory(object())


def test_the_memory_part_alone_names_what_registers_the_openai_adapter():
    # The memory imports no SDK: a client is recognised through the adapters a part above registers.
    code = (
        "import openai\n"
        "from memora.memory.core import ShortTermMemory\n"
        "try:\n"
        "    ShortTermMemory(openai.OpenAI(api_key='sk-test', base_url='http://127.0.0.1:9'))\n"
        "except TypeError as error:\n"
        "    print(error)\n"
        "import memora.backends\n"
        "print(type(ShortTermMemory(openai.OpenAI(api_key='sk-test', base_url='http://127.0.0.1:9')).server.backend).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert "import memora.backends first" in out and out.rstrip().endswith("OpenAIResponsesBackend")


def test_full_history_cost_follows_a_rollback_and_a_different_message(backend):
    memory = ShortTermMemory(backend)
    chat(memory, "hello")
    memory.add_user_message("a short one")
    full_history_tokens(memory)
    memory.rollback_last_user_message()
    memory.add_user_message("a much longer message than the one rolled back, " * 5)
    expected = LocalTokenCounter().count(memory.model, SYSTEM_PROMPT, memory.history)
    assert full_history_tokens(memory) == expected


def test_the_history_is_a_value_a_reader_holds_while_the_memory_moves_on(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "a", "b")
    held, listed = memory.conversation, memory.history
    chat(memory, "c", "d")  # the window is one pair: these turns fold "a" and "b"
    assert [m.content for m in held.messages] == [m.content for m in listed] == ["a", "reply 1", "b", "reply 2"]
    assert (held.folded, held.summary) == (0, "")
    now = memory.conversation
    assert now.folded == memory.summarized_message_count == 4 and now.summary == memory.summary
    assert now.counts == tuple(memory._message_tokens(m) for m in memory.history)
    assert now.unfolded(len(now.messages)) == now.counts[4:] and now.tokens == sum(now.counts)


def test_a_pending_message_is_no_finished_pair_and_leaves_without_a_trace(backend):
    memory = ShortTermMemory(backend)
    chat(memory, "a", "b")
    memory.add_user_message("pending")
    history = memory.conversation
    assert history.pending and history.finished == 4 and history.turn_number == 3
    assert history.without_pending().messages == history.messages[:-1] and history.without_pending().without_pending().finished == 4


BOUNDARY_TURNS = (
    "My English level is B1, and I want to practise travel English before my trip to Japan next spring. " * 6,
    "What is the difference between 'borrow' and 'lend'? Please give me two examples of each one. " * 6,
    "How do you pronounce 'comfortable', and which syllable is stressed when people speak fast? " * 6,
    "Can you plan a short practice for my level and my goal, with one exercise for each day? " * 6,
)


def _last_turn(budget: int) -> ShortTermMemory:
    memory = ShortTermMemory(ScriptedBackend(), max_input_tokens=budget, max_recent_turns=10)
    chat(memory, *BOUNDARY_TURNS)
    return memory


def test_a_request_of_exactly_the_budget_is_sent_whole_and_one_token_more_folds():
    """The budget inequality at its boundary, through the memory's own turn: ``<=``, not ``<``."""
    unbounded = _last_turn(100_000).ledger[-1]
    assert unbounded.kind == "reply" and unbounded.newly_summarized == 0
    exactly = unbounded.counted_input_tokens  # the last request, every message verbatim

    at_budget = _last_turn(exactly)
    sent = at_budget.ledger[-1]
    assert (sent.counted_input_tokens, sent.newly_summarized, at_budget.summary) == (exactly, 0, "")

    one_over = _last_turn(exactly - 1)
    before = len(at_budget.ledger) - 1

    def sent_before(memory: ShortTermMemory) -> list[tuple[str, int, int]]:
        return [(r.kind, r.counted_input_tokens, r.newly_summarized) for r in memory.ledger[:before]]

    assert sent_before(one_over) == sent_before(at_budget), "the turns before are the same"
    *folds, reply = one_over.ledger[before:]
    assert folds and {fold.kind for fold in folds} == {"summary"}
    assert reply.newly_summarized > 0 and reply.counted_input_tokens <= exactly - 1
