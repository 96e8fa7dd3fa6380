"""Over many random conversations: budget kept, history intact, nothing lost or folded twice."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memora import ContextBudgetError, ShortTermMemory
from memora.memory import policies
from memora.text.tokens import LocalTokenCounter
from tests.support.fakes import ScriptedBackend

words = st.sampled_from(["travel", "airport", "B1", "grammar", "旅遊", "英文", "練習", "🙂", "please", "why?"])
texts = st.lists(words, min_size=1, max_size=120).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(texts, min_size=1, max_size=14),
    budget=st.integers(min_value=450, max_value=1500),
    recent=st.integers(min_value=0, max_value=4),
    policy=st.sampled_from(policies.names()),
    summary_words=st.integers(min_value=1, max_value=400),
)
def test_random_conversations_keep_every_invariant(messages, budget, recent, policy, summary_words):
    backend = ScriptedBackend(summary_text=lambda request: " ".join(["fact"] * summary_words))
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=recent, fold_policy=policy)
    counter = LocalTokenCounter()
    kept: list[str] = []
    for text in messages:
        requests_before = len(backend.replies)
        try:
            with memory.turn(text) as turn:
                reply = turn.run()
        except ContextBudgetError as error:
            assert error.input_tokens > error.max_input_tokens == budget
            continue
        kept += [text, reply]
        request = backend.replies[requests_before]
        assert counter.count(request.model, request.instructions, request.messages) <= budget
        assert len(backend.replies) == requests_before + 1

        # History is intact: every accepted message, in order, in full.
        assert [m.content for m in memory.history] == kept
        # Folded plus window is exactly the completed history, each message once.
        folded = [m for s in backend.summaries for m in s.new_messages]
        pointer = memory.summarized_message_count
        assert folded == memory.history[:pointer]
        window = [m for m, source in zip(turn.prepared.context_messages, turn.prepared.sources, strict=True) if source == "window"]
        assert window == memory.history[pointer:-2]
        assert turn.prepared.context_messages[-1].content == text
    assert memory.session_total_tokens == sum(r.total_tokens for r in memory.ledger)
