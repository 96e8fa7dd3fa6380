"""What if: the live conversation replayed under every fold policy and under "send the full history", with money.

Pure and model-free: ``memora.teaching.replay`` does the replaying, and its docstring states what every figure rests
on. The policy the conversation runs under is replayed with its real summaries, so its column is what was sent
(unless a setting changed midway); the other policy's summaries never existed and are estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memora.memory import ShortTermMemory, policies
from memora.memory.core import local_budget
from memora.teaching.prices import ModelPrice, PriceTable
from memora.teaching.replay import FULL_HISTORY, Replay, Strategy, real_folds, replay, replay_full_history, replay_sizes


@dataclass(frozen=True)
class Outcome:
    """One strategy's replay, and its price in USD: every request's input at the input price plus the summaries
    written at the output price, uncached (None when the model has no price, or the offline engine answers)."""

    replay: Replay
    usd: float | None
    live: bool

    @property
    def strategy(self) -> Strategy:
        return self.replay.strategy


@dataclass(frozen=True)
class WhatIf:
    """The live policy first, then every other registered policy, then the full history; ``model`` is the priced model
    or None; ``other_cap`` is the summary cap of the other policies' estimated summaries."""

    turns: int
    outcomes: tuple[Outcome, ...]
    model: str | None
    other_cap: int

    def outcome(self, strategy: Strategy) -> Outcome:
        return next(o for o in self.outcomes if o.strategy == strategy)

    @property
    def other(self) -> Outcome:
        """The first fold policy the conversation does not run under (the Usage chart draws it beside the ledger)."""
        return self.outcomes[1]


def replay_cost(run: Replay, price: ModelPrice) -> float:
    """USD of a replay's input and summaries at ``price``, with no prompt cache (a replay cannot know what hits)."""
    return (run.input_tokens * price.input + run.summary_output_tokens * price.output) / 1_000_000


def what_if(memory: ShortTermMemory, prices: PriceTable | None = None) -> WhatIf:
    """``memory``'s finished turns replayed three ways, under its current settings, folding ahead as the page does.

    A pending message (a reply in progress) is left out. Makes no request and changes nothing in ``memory``.
    """
    counts = memory.conversation.finished_counts
    budget, recent = local_budget(memory), memory.max_recent_turns
    live = memory.limits.fold_policy
    sizes = replay_sizes(memory)
    runs = [
        replay(counts, live, sizes, budget=budget, max_recent_turns=recent, real_folds=real_folds(memory)),
        *(replay(counts, other, sizes, budget=budget, max_recent_turns=recent) for other in policies.names() if other != live),
        replay_full_history(counts, sizes.fixed, budget=budget),
    ]
    price = None if memory.server.backend.offline else (PriceTable() if prices is None else prices).price_for(memory.model)
    outcomes = tuple(Outcome(run, replay_cost(run, price) if price else None, run.strategy == live) for run in runs)
    return WhatIf(len(counts) // 2, outcomes, price.model if price else None, sizes.summary_cap)


def cache_key(memory: ShortTermMemory) -> Sequence[object]:
    """What a ``what_if`` depends on: the history's length, its folds and requests, and the settings it replays."""
    return (
        len(memory.history),
        len(memory.conversation.versions),
        len(memory.ledger),
        memory.limits.fold_policy,
        memory.max_input_tokens,
        local_budget(memory),
        memory.max_recent_turns,
        memory.model,
        memory.server.backend.offline,
    )


@dataclass(frozen=True)
class Payoff:
    """When a memory's total cost drops below the full history's, read off two replays' per-turn totals.

    ``turn`` is the first turn after which the memory's running total (every request's input, summaries written
    included) is below the full history's; None when it never is in this conversation. ``memory`` and ``full`` are
    the two running totals at that turn, or at the last turn when it never pays. ``summaries`` is what the memory's
    summary requests cost in all (their input and what they wrote): the reason it can cost more at first.
    """

    strategy: Strategy
    turn: int | None
    memory: int
    full: int
    turns: int
    summaries: int


def payoff(run: Replay, full: Replay) -> Payoff:
    """``run`` against ``full`` (``replay_full_history``), from their ``tokens_per_turn``. A fold ahead counts for the
    turn whose reply it follows, so a memory pays for a fold before the turn that gains from it."""
    memory_total = full_total = 0
    pairs = list(zip(run.tokens_per_turn(), full.tokens_per_turn(), strict=True))
    summaries = sum(r.input_tokens + r.output_tokens for r in run.requests if r.kind == "summary")
    for turn, (memory_tokens, full_tokens) in enumerate(pairs, start=1):
        memory_total += memory_tokens
        full_total += full_tokens
        if memory_total < full_total:
            return Payoff(run.strategy, turn, memory_total, full_total, run.turns, summaries)
    return Payoff(run.strategy, None, memory_total, full_total, run.turns, summaries)


def payoffs(comparison: WhatIf) -> tuple[Payoff, ...]:
    """Each fold policy of ``comparison`` against its full history, the live policy first."""
    full = comparison.outcome(FULL_HISTORY).replay
    return tuple(payoff(o.replay, full) for o in comparison.outcomes if o.strategy != FULL_HISTORY)
