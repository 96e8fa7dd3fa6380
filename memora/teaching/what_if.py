"""What if: the live conversation beside every other fold policy and "send the full history", with
money.

Pure and model-free. The policy the conversation runs under is not replayed: its column is the
ledger itself (``ledger_column``), every request that was really sent, so it cannot disagree with
the ledger cards, whatever setting changed midway. The other columns are replays
(``memora.teaching.replay``, whose docstring states what every figure of theirs rests on): another
policy's summaries never existed and are estimated; the full history's replay is exact arithmetic on
the same counts.

Every column counts a request's input by its **counted** input, the count taken before sending
(``UsageRecord.counted_input_tokens``): that is what the replays count, on the same tokenizer, so
the columns compare like with like. The figure a server reports afterwards may differ from it by a
few tokens (its own chat framing); the ledger cards show both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from memora.memory import ShortTermMemory, policies
from memora.memory.core import local_budget
from memora.teaching.prices import ModelPrice, PriceTable
from memora.teaching.replay import (
    FULL_HISTORY,
    Replay,
    Strategy,
    replay,
    replay_full_history,
    replay_sizes,
)
from memora.text.usage import UsageRecord

ROWS = (
    "reply_requests",
    "summary_requests",
    "reply_tokens",
    "summary_tokens",
    "summaries_written",
    "total_tokens",
    "over_budget",
    "usd",
)
"""The comparison's rows, in order: the names of ``Column``'s figures, and of their words in the
catalogs (``whatif.<row>``)."""


@dataclass(frozen=True)
class Column:
    """One strategy's figures in the comparison table.

    ``from_ledger`` is True for the live policy's column, read off the ledger; False for a replay.
    ``reply_tokens`` and ``summary_tokens`` are the counted input of every reply request and every
    summary request; ``summaries_written`` the summaries' output. ``over_budget`` counts replies
    over the budget (for the ledger, ``UsageRecord.over_budget``: the server counted more than the
    budget the request was planned for; for a replay, a reply that would not have fit). ``usd`` is
    every request's input at the input price plus the summaries written at the output price,
    uncached; None when nothing is priced. ``estimated`` is True when any summary in it never
    existed. ``tokens_per_turn`` holds, for turns 1..n, the input of every request of that turn plus
    the summaries it wrote; a fold ahead counts for the turn whose reply it follows.
    """

    strategy: Strategy
    from_ledger: bool
    reply_requests: int
    summary_requests: int
    reply_tokens: int
    summary_tokens: int
    summaries_written: int
    over_budget: int
    usd: float | None
    estimated: bool
    tokens_per_turn: tuple[int, ...]

    @property
    def requests(self) -> int:
        return self.reply_requests + self.summary_requests

    @property
    def input_tokens(self) -> int:
        """Every request's counted input, replies and summaries."""
        return self.reply_tokens + self.summary_tokens

    @property
    def summaries_cost(self) -> int:
        """What the summaries cost in all: their requests' input and what they wrote. 0 with no
        summary request."""
        return self.summary_tokens + self.summaries_written

    @property
    def total_tokens(self) -> int:
        """Every request's input plus the summaries written: what the payoff compares."""
        return self.input_tokens + self.summaries_written

    def figure(self, row: str) -> int | float | None:
        """The figure of ``row`` (one of ``ROWS``)."""
        if row not in ROWS:
            raise KeyError(row)
        return getattr(self, row)


def column_cost(
    input_tokens: int, summaries_written: int, price: ModelPrice | None
) -> float | None:
    """USD of ``input_tokens`` at the input price and ``summaries_written`` at the output price,
    with no prompt cache (a replay cannot know what would have hit it); None for no price."""
    if price is None:
        return None
    return (input_tokens * price.input + summaries_written * price.output) / 1_000_000


def ledger_column(
    strategy: Strategy, records: Sequence[UsageRecord], turns: int, price: ModelPrice | None = None
) -> Column:
    """The live policy's column: the ledger's ``records`` summed, every one of them, as they were
    sent.

    ``turns`` is the number of finished turns; ``tokens_per_turn`` has that many entries. A record
    of a later turn (the folds of a message still being answered, or of one that failed after its
    folds) was sent after the last finished reply, so it counts for the last finished turn, as a
    fold ahead does; with no finished turn it counts in the totals only. A summary record whose
    output is unknown (None) wrote 0 tokens.
    """
    replies = [r for r in records if r.kind == "reply"]
    summaries = [r for r in records if r.kind == "summary"]
    written = sum(r.output_tokens or 0 for r in summaries)
    reply_tokens = sum(r.counted_input_tokens for r in replies)
    summary_tokens = sum(r.counted_input_tokens for r in summaries)
    per_turn = [0] * turns
    if turns:
        for r in records:
            output = (r.output_tokens or 0) if r.kind == "summary" else 0
            per_turn[min(r.turn, turns) - 1] += r.counted_input_tokens + output
    return Column(
        strategy,
        from_ledger=True,
        reply_requests=len(replies),
        summary_requests=len(summaries),
        reply_tokens=reply_tokens,
        summary_tokens=summary_tokens,
        summaries_written=written,
        over_budget=sum(r.over_budget for r in replies),
        usd=column_cost(reply_tokens + summary_tokens, written, price),
        estimated=False,
        tokens_per_turn=tuple(per_turn),
    )


def replay_column(run: Replay, price: ModelPrice | None = None) -> Column:
    """A replayed strategy's column: its requests summed (a reply's output is left out, as every
    replay leaves it)."""
    summary_tokens = sum(r.input_tokens for r in run.requests if r.kind == "summary")
    return Column(
        run.strategy,
        from_ledger=False,
        reply_requests=run.reply_requests,
        summary_requests=run.summary_requests,
        reply_tokens=run.input_tokens - summary_tokens,
        summary_tokens=summary_tokens,
        summaries_written=run.summary_output_tokens,
        over_budget=run.over_budget,
        usd=column_cost(run.input_tokens, run.summary_output_tokens, price),
        estimated=run.estimated,
        tokens_per_turn=run.tokens_per_turn(),
    )


@dataclass(frozen=True)
class WhatIf:
    """The comparison table: ``columns`` are the live policy's (the ledger) first, then every other
    registered policy's replay, then the full history's; ``replays`` are the replays those other
    columns were summed from, in the same order. ``model`` is the priced model or None;
    ``other_cap`` is the summary cap of the other policies' estimated summaries."""

    turns: int
    columns: tuple[Column, ...]
    replays: tuple[Replay, ...]
    model: str | None
    other_cap: int

    def column(self, strategy: Strategy) -> Column:
        """The column of ``strategy``; StopIteration for a strategy not in the table."""
        return next(c for c in self.columns if c.strategy == strategy)

    @property
    def live(self) -> Column:
        """The live policy's column: the ledger's."""
        return self.columns[0]

    @property
    def other(self) -> Replay:
        """The replay of the first fold policy the conversation does not run under (the Usage chart
        draws it beside the ledger)."""
        return self.replays[0]


def what_if(memory: ShortTermMemory, prices: PriceTable | None = None) -> WhatIf:
    """``memory``'s ledger beside its finished turns replayed by every other policy and by the full
    history, under its current settings, folding ahead as the page does.

    A pending message (a reply in progress) is left out of the replays; the ledger's column holds
    every request it has, a pending turn's folds included (``ledger_column``). Makes no request and
    changes nothing in ``memory``.
    """
    counts = memory.conversation.finished_counts
    turns = len(counts) // 2
    budget = local_budget(memory)
    recent = memory.max_recent_turns
    live = memory.limits.fold_policy
    sizes = replay_sizes(memory)
    runs = (
        *(
            replay(counts, other, sizes, budget=budget, max_recent_turns=recent)
            for other in policies.names()
            if other != live
        ),
        replay_full_history(counts, sizes.fixed, budget=budget),
    )
    price = (
        None
        if memory.server.backend.offline
        else (PriceTable() if prices is None else prices).price_for(memory.model)
    )
    columns = (
        ledger_column(live, memory.ledger, turns, price),
        *(replay_column(run, price) for run in runs),
    )
    return WhatIf(turns, columns, runs, price.model if price else None, sizes.summary_cap)


def cache_key(memory: ShortTermMemory) -> Sequence[object]:
    """What a ``what_if`` depends on: the history's length, its folds and requests, and the settings
    it replays."""
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
    """Whether a memory's total cost ends below the full history's, in figures of the comparison
    table.

    ``memory`` and ``full`` are the two columns' totals (the table's total row); ``summaries`` what
    the memory's summary requests cost in all (its summary rows, sent and written), the reason it
    can cost more at first; ``summary_requests`` its summary requests, 0 when it has folded nothing
    yet. ``turn`` is the turn from which the memory's running total stays below the full history's
    to the last turn; None when it does not end below it.
    """

    strategy: Strategy
    turn: int | None
    memory: int
    full: int
    turns: int
    summaries: int
    summary_requests: int


def payoff(column: Column, full: Column) -> Payoff:
    """``column`` against ``full`` (the full history's), from their ``tokens_per_turn``: the running
    totals are only read to find the turn; every figure is the table's. Raises ValueError for
    columns of different lengths."""
    running = list(
        zip(accumulate(column.tokens_per_turn), accumulate(full.tokens_per_turn), strict=True)
    )
    since = None
    for turn, (memory_total, full_total) in enumerate(running, start=1):
        if memory_total >= full_total:
            since = None
        elif since is None:
            since = turn
    turns = len(running)
    return Payoff(
        column.strategy,
        since,
        column.total_tokens,
        full.total_tokens,
        turns,
        column.summaries_cost,
        column.summary_requests,
    )


def payoffs(comparison: WhatIf) -> tuple[Payoff, ...]:
    """Each fold policy's column of ``comparison`` against the full history's, the live policy
    first."""
    full = comparison.column(FULL_HISTORY)
    return tuple(payoff(c, full) for c in comparison.columns if c.strategy != FULL_HISTORY)
