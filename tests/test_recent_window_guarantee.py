"""The article's guarantee, under both fold policies and with the page's prefold: every reply request
holds at least ``max_recent_turns`` whole pairs verbatim whenever they fit beside the message."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memora import ContextBudgetError, ShortTermMemory
from memora.memory.core import local_budget, request_sizes
from memora.text.tokens import count_message
from tests.support.fakes import ScriptedBackend

words = st.sampled_from(["travel", "airport", "B1", "grammar", "旅遊", "英文", "🙂", "please", "why?", "I live in Taipei."])
texts = st.lists(words, min_size=1, max_size=12).map(" ".join)
# Lengths spread from a word to most of a budget: a long message left in the window is what a prefold misjudges.
long_texts = st.integers(min_value=1, max_value=400).map(lambda n: " ".join(["travel"] * n))


def window_fits(memory: ShortTermMemory, completed: list, message: str) -> bool:
    """The last ``max_recent_turns`` pairs, a full-length summary and the message within the budget."""
    sizes = request_sizes(memory)
    window = completed[max(0, len(completed) - 2 * memory.max_recent_turns) :]
    tokens = sum(count_message(m.role, m.content) for m in window)
    return sizes.fixed + sizes.full_summary + tokens + count_message("user", message) <= local_budget(memory)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.tuples(st.one_of(texts, long_texts), st.one_of(texts, long_texts)), min_size=1, max_size=30),
    budget=st.integers(min_value=400, max_value=2000),
    recent=st.integers(min_value=0, max_value=4),
    policy=st.sampled_from(["window", "watermark"]),
    prefold=st.booleans(),
)
def test_the_recent_window_stays_verbatim_whenever_it_fits(turns, budget, recent, policy, prefold):
    replies = iter(reply for _, reply in turns)
    backend = ScriptedBackend(reply_text=lambda request: next(replies))
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=recent, fold_policy=policy)
    for text, _ in turns:
        completed = list(memory.history)
        try:
            with memory.turn(text) as turn:
                turn.run()
        except ContextBudgetError:
            # A message that fits only if the new summary comes out short folds first, as the article's
            # prepare does, and is refused when it still does not fit: its fold stands, window included.
            break
        if window_fits(memory, completed, text):
            kept = completed[max(0, len(completed) - 2 * recent) :]
            sent = [m for m, source in zip(turn.prepared.context_messages, turn.prepared.sources, strict=True) if source == "window"]
            assert sent[len(sent) - len(kept) :] == kept, f"{len(sent) // 2} of {len(kept) // 2} recent pairs sent"
        if prefold:
            memory.prefold()
