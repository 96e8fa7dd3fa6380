"""Replays, measurements and the report of ``python -m benchmarks.memory``."""

from __future__ import annotations

import copy
import gc
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from benchmarks.memory.recording import DEFAULT_CUT, SUMMARY_TOKEN_CAP, Call, CutRule, RecordingBackend
from benchmarks.memory.script import Script, make_script
from benchmarks.memory.strategies import Article, FullHistory, Limits, Memora, Strategy, memora_name
from memora.memory import policies
from memora.teaching.prices import ModelPrice, PriceTable
from memora.text.tokens import o200k_base

Factory = Callable[[RecordingBackend, Limits], Strategy]
REFERENCE = "article-v0.7"
PAGE = "memora+prefold"
"""The strategy the page runs by default: the article's window with a prefold after each reply."""
RECOMMENDED = "memora-watermark+prefold"
"""The strategy docs/benchmarks.md recommends for applications: the watermark policy with a prefold after each reply."""
KINDS = ("reply", "summary", "count")
PRICED_MODEL = "gpt-5-mini"
COST_PARTS = ("reply_input", "reply_output", "summary_input", "summary_output")


def usd_per_100_turns(calls: Sequence[Call], turns: int, price: ModelPrice) -> dict[str, float]:
    """USD per 100 turns at ``price`` (list prices, no prompt cache), by part, and ``total``.

    Reply and summary requests are priced apart, input and output each at its
    own rate; count requests bill nothing. An empty record costs 0.
    """
    tokens = dict.fromkeys(COST_PARTS, 0)
    for call in calls:
        if call.kind in ("reply", "summary"):
            tokens[f"{call.kind}_input"] += call.input_tokens
            tokens[f"{call.kind}_output"] += call.output_tokens
    rate = {"input": price.input, "output": price.output}
    per_100 = 100 / turns if turns else 0.0
    usd = {part: n * rate[part.rsplit("_", 1)[1]] / 1_000_000 * per_100 for part, n in tokens.items()}
    usd["total"] = sum(usd.values())
    return usd


def list_price(model: str = PRICED_MODEL) -> ModelPrice:
    """The dated list price of ``model`` from ``memora.teaching.prices``."""
    price = PriceTable().price_for(model)
    if price is None:
        raise LookupError(f"{model} has no price in memora.teaching.prices")
    return price


def strategies() -> dict[str, Factory]:
    """Every strategy the benchmark compares, by name, in table order: Memora under each registered fold policy
    (``memora.memory.policies``), without and with the page's prefold."""
    found: dict[str, Factory] = {"full-history": FullHistory, REFERENCE: Article}
    for policy in policies.names():
        name = memora_name(policy)
        found[name] = lambda b, lim, policy=policy: Memora(b, lim, fold_policy=policy)
        found[f"{name}+prefold"] = lambda b, lim, policy=policy: Memora(b, lim, fold_policy=policy, prefold=True)
    return found


@dataclass(frozen=True)
class TokenFigures:
    """What one strategy sent over one scripted conversation, from the backend's records.

    Count calls bill no tokens, so ``input_tokens`` sums reply and summary
    requests only. ``over_budget`` counts reply requests above the budget,
    ``summary_over_budget`` summary requests above it (a summary request is a
    request too: Memora keeps every one within the budget, a peer need not).
    ``most_summaries_in_one_turn`` counts the summary requests one reply waited
    for, ``turns_waiting_on_summary`` the turns whose reply waited for at least
    one; ``summaries_after_reply`` counts those made after a reply (prefolds).
    ``mean_recent_pairs`` is the mean number of previous pairs each reply request
    sent verbatim (``Call.recent_pairs``); ``short_of_recent`` counts the reply
    requests, of those with at least ``recent_turns`` previous pairs, that sent fewer.
    """

    strategy: str
    turns: int
    input_tokens: int
    output_tokens: int
    largest_reply_input: int
    largest_summary_input: int
    over_budget: int
    summary_over_budget: int
    calls: dict[str, int]
    calls_per_turn: dict[str, float]
    most_summaries_in_one_turn: int
    turns_waiting_on_summary: int
    summaries_after_reply: int
    mean_recent_pairs: float
    short_of_recent: int
    ratio_to_article: dict[str, float | None] = field(default_factory=dict)
    usd_per_100_turns: dict[str, float] = field(default_factory=dict)
    """At ``PRICED_MODEL`` list prices; see ``usd_per_100_turns``."""
    facts_probed: int = 0
    recalled: int = 0
    stale: int = 0
    missing: int = 0
    """The retention probe over every reply request (``retention.py``): planted facts due, and by outcome."""
    without_current: int = 0
    """Reply requests that lacked the user's current message (langmem's langchain-ai/langmem#77)."""

    @property
    def retention(self) -> float:
        """The share of probed facts whose latest value reached the reply request (0 when none was probed)."""
        return self.recalled / self.facts_probed if self.facts_probed else 0.0


def replay(
    factory: Factory,
    script: Script,
    limits: Limits,
    delay_s: float = 0.0,
    summary_cap: int = SUMMARY_TOKEN_CAP,
    cut: CutRule = DEFAULT_CUT,
) -> tuple[Strategy, list[float]]:
    """Plays the whole script, probing each reply request for its planted facts; returns the strategy and each turn's
    time to first token. Every summary is at most ``summary_cap`` tokens, cut by ``cut`` (``recording.CutRule``)."""
    backend = RecordingBackend(script.replies, delay_s=delay_s, script=script, summary_cap=summary_cap, cut=cut)
    strategy = factory(backend, limits)
    firsts = []
    for number, text in enumerate(script.user_messages, start=1):
        strategy.backend.turn = number
        firsts.append(strategy.play_turn(text))
    return strategy, firsts


def token_figures(name: str, backend: RecordingBackend, turns: int, budget: int, recent_turns: int) -> TokenFigures:
    calls = backend.calls
    pairs = [c.recent_pairs or 0 for c in calls if c.kind == "reply"]
    billed = [c for c in calls if c.kind != "count"]
    by_kind = Counter(c.kind for c in calls)
    replies = [c.input_tokens for c in calls if c.kind == "reply"]
    summaries = [c.input_tokens for c in calls if c.kind == "summary"]
    # Only summaries the reply had to wait for; a prefold's belongs to no reply's wait.
    per_turn = Counter(c.turn for c in calls if c.kind == "summary" and not c.after_reply)
    recalls = [c.recall for c in calls if c.kind == "reply" and c.recall is not None]
    return TokenFigures(
        strategy=name,
        turns=turns,
        input_tokens=sum(c.input_tokens for c in billed),
        output_tokens=sum(c.output_tokens for c in billed),
        largest_reply_input=max(replies, default=0),
        largest_summary_input=max(summaries, default=0),
        over_budget=sum(1 for tokens in replies if tokens > budget),
        summary_over_budget=sum(1 for tokens in summaries if tokens > budget),
        calls={kind: by_kind[kind] for kind in KINDS},
        calls_per_turn={kind: by_kind[kind] / turns for kind in KINDS},
        most_summaries_in_one_turn=max(per_turn.values(), default=0),
        turns_waiting_on_summary=len(per_turn),
        summaries_after_reply=sum(1 for c in calls if c.kind == "summary" and c.after_reply),
        mean_recent_pairs=statistics.fmean(pairs) if pairs else 0.0,
        short_of_recent=sum(1 for previous, kept in enumerate(pairs) if previous >= recent_turns and kept < recent_turns),
        usd_per_100_turns=usd_per_100_turns(calls, turns, list_price()),
        facts_probed=sum(r.probed for r in recalls),
        recalled=sum(r.recalled for r in recalls),
        stale=sum(r.stale for r in recalls),
        missing=sum(r.missing for r in recalls),
        without_current=sum(1 for c in calls if c.kind == "reply" and not c.has_current),
    )


def _ratio(value: float, reference: float) -> float | None:
    return None if reference == 0 else value / reference


def with_ratios(rows: list[TokenFigures]) -> list[TokenFigures]:
    ref = next(r for r in rows if r.strategy == REFERENCE)
    ref_calls = sum(ref.calls.values())
    out = []
    for row in rows:
        ratios = {
            "input_tokens": _ratio(row.input_tokens, ref.input_tokens),
            "output_tokens": _ratio(row.output_tokens, ref.output_tokens),
            "largest_reply_input": _ratio(row.largest_reply_input, ref.largest_reply_input),
            "model_calls": _ratio(sum(row.calls.values()), ref_calls),
            "summary_calls": _ratio(row.calls["summary"], ref.calls["summary"]),
        }
        out.append(replace(row, ratio_to_article=ratios))
    return out


def bookkeeping_us(
    factories: dict[str, Factory],
    history_turns: Sequence[int],
    limits: Limits,
    *,
    block: int = 12,
    repeats: int = 7,
    seed: int = 7,
) -> dict[str, dict[int, float]]:
    """Memory bookkeeping per turn, in microseconds, by strategy and turns of history.

    Each strategy is replayed to each length in ``history_turns``. Then each
    repeat plays ``block`` more turns on a deep copy of every such state, with
    fresh messages (so new text is tokenized as it would be in real use; a text
    the conversation has already seen, as the scripts' stock phrases often are,
    is not tokenized again, by design). A turn's bookkeeping is its wall time
    minus the time spent inside the backend (for the article, that includes its
    count calls, which are model calls): what the memory does for the turn,
    tokenizing its message and reply, planning, folding's own work around each
    summary request (with that request's count for the ledger), building the
    context, committing and recording, and the prefold's plan; plus the
    consumer's loop over two reply deltas (about a microsecond). The recording
    backend's reply, summary and counts, deltas included, are made in its timed part.
    The figure is the median, over repeats, of the mean per turn of a block.
    Repeats go round every strategy and length in turn, so that a burst of load
    from elsewhere on the machine spoils one sample of many figures, not one figure.
    """
    states = {}
    for name, factory in factories.items():
        for turns in history_turns:
            strategy, _ = replay(factory, make_script(turns, seed), limits)
            strategy.backend.calls.clear()
            states[name, turns] = strategy
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in states}
    for repeat in range(repeats):
        fresh = make_script(block, seed=10_000 + repeat)
        for key, strategy in states.items():
            samples[key].append(_block_mean(strategy, fresh))
    return {name: {turns: statistics.median(samples[name, turns]) * 1e6 for turns in history_turns} for name in factories}


def tokenization_us(*, block: int = 12, repeats: int = 7, with_reply: bool = False) -> float:
    """One uncached o200k_base tokenization of a turn's new user message, in microseconds.

    The same fresh messages ``bookkeeping_us`` plays, each encoded directly (no
    cache), the fastest of five tries each; the median over repeats of the mean
    per message of a block. It is the unit of the bookkeeping ratio: the least
    work a turn can do is tokenize its new message once. With ``with_reply``,
    each message and then its scripted reply: the turn's new text, all of which
    the memory must count (the reply for the next turn's plan). The fastest try is a
    best case (the same text, hot in the CPU's caches); the memory tokenizes each
    text once, so its own tokenizations cost more per token than this unit.
    """
    encoding = o200k_base()
    encoding.encode_ordinary("warm up")
    means = []
    for repeat in range(repeats):
        fresh = make_script(block, seed=10_000 + repeat)
        times = []
        for message, reply in zip(fresh.user_messages, fresh.replies, strict=True):
            texts = (message, reply) if with_reply else (message,)
            times.append(sum(_fastest_encode(encoding, text) for text in texts))
        means.append(statistics.fmean(times))
    return statistics.median(means) * 1e6


def _fastest_encode(encoding: Any, text: str, tries: int = 5) -> float:
    fastest = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        encoding.encode_ordinary(text)
        fastest = min(fastest, time.perf_counter() - began)
    return fastest


def _block_mean(strategy: Strategy, fresh: Script) -> float:
    clone = copy.deepcopy(strategy)
    clone.backend.replies, clone.backend._next_reply = fresh.replies, 0
    times = []
    # As timeit does: the cyclic GC's pauses scale with every live object in this
    # process (other strategies' replays included), not with this memory's work.
    gc.collect()
    gc.disable()
    try:
        for text in fresh.user_messages:
            busy, began = clone.backend.busy_s, time.perf_counter()
            clone.play_turn(text)
            times.append(time.perf_counter() - began - (clone.backend.busy_s - busy))
    finally:
        gc.enable()
    # The mean over the block, not its median: fold and no-fold turns alternate in
    # cycles (the watermark's large folds), and a block's median would depend on where the cycle starts.
    return statistics.fmean(times)


@dataclass(frozen=True)
class TtftFigures:
    """Seconds from send to first reply token with a fixed delay on every request."""

    strategy: str
    delay_ms: float
    turns: int
    mean_ms: float
    median_ms: float
    max_ms: float
    turns_waiting_on_summary_or_count: int


def ttft(factory: Factory, name: str, script: Script, limits: Limits, delay_s: float) -> TtftFigures:
    _, firsts = replay(factory, script, limits, delay_s=delay_s)
    # A turn waited on something other than its reply when it took well over one delay.
    waited = sum(1 for f in firsts if f > 1.5 * delay_s)
    ms = [f * 1e3 for f in firsts]
    return TtftFigures(name, delay_s * 1e3, len(ms), statistics.fmean(ms), statistics.median(ms), max(ms), waited)


@dataclass
class Report:
    budget: int
    recent_turns: int
    seed: int
    tokens: dict[int, list[TokenFigures]]
    bookkeeping: dict[str, dict[int, float]]
    ttft: list[TtftFigures]
    summaries_by_budget: dict[int, dict[str, int]] = field(default_factory=dict)
    """Budget -> summary requests of Memora under each fold policy (by strategy name) over the longest script."""
    seconds: float = 0.0
    sweep: list[Any] = field(default_factory=list)
    """``sweep.Point``s (``--peers``): every strategy and installed peer at each budget and summary cap, held-out seeds."""
    peers_missing: list[str] = field(default_factory=list)
    tokenization_us: float = 0.0
    """One tokenization of a turn's new message (``tokenization_us``): the unit of the bookkeeping ratio."""
    new_text_us: float = 0.0
    """One tokenization of a turn's message and its reply (``tokenization_us(with_reply=True)``): the second unit."""
    cut: CutRule = DEFAULT_CUT
    """How the recorder cut an over-cap summary in the token tables and the sweep (``recording.CutRule``)."""

    def as_json(self) -> dict:
        return {
            "budget": {"max_input_tokens": self.budget, "max_recent_turns": self.recent_turns},
            "seed": self.seed,
            "tokens": {str(turns): [asdict(r) for r in rows] for turns, rows in self.tokens.items()},
            "bookkeeping_us_per_turn": {name: {str(n): round(us, 1) for n, us in by_n.items()} for name, by_n in self.bookkeeping.items()},
            "tokenization_us": round(self.tokenization_us, 2),
            "new_text_tokenization_us": round(self.new_text_us, 2),
            "ttft": [asdict(t) for t in self.ttft],
            "summary_requests_by_budget": {str(budget): counts for budget, counts in self.summaries_by_budget.items()},
            "seconds": round(self.seconds, 1),
            "priced_at": {"model": PRICED_MODEL, **{k: v for k, v in asdict(list_price()).items() if k != "model"}},
            "cut": self.cut,
            "sweep": [{**asdict(p), "holds": p.holds, "holds_every_request": p.holds_every_request} for p in self.sweep],
            "peers_missing": self.peers_missing,
        }


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(
    *,
    conversation_turns: Sequence[int] = (20, 100, 500),
    history_turns: Sequence[int] = (10, 100, 1000),
    seed: int = 7,
    delay_ms: float = 50.0,
    ttft_turns: int = 30,
    limits: Limits = Limits(),
    repeats: int = 11,
    budgets: Sequence[int] | None = None,
    cut: CutRule = DEFAULT_CUT,
) -> Report:
    began = time.perf_counter()
    factories = strategies()
    longest = make_script(max(conversation_turns), seed)
    tokens: dict[int, list[TokenFigures]] = {}
    for turns in conversation_turns:
        script = longest.prefix(turns)
        rows = []
        for name, factory in factories.items():
            strategy, _ = replay(factory, script, limits, cut=cut)
            rows.append(token_figures(name, strategy.backend, turns, limits.max_input_tokens, limits.max_recent_turns))
        tokens[turns] = with_ratios(rows)
        _progress(f"token figures, {turns}-turn conversation: {len(rows)} strategies replayed; {time.perf_counter() - began:,.0f} s so far")
    bookkeeping = bookkeeping_us(factories, history_turns, limits, repeats=repeats, seed=seed)
    _progress(f"bookkeeping timed ({repeats} repeats); {time.perf_counter() - began:,.0f} s so far")
    short = make_script(ttft_turns, seed)
    ttfts = [ttft(factory, name, short, limits, delay_ms / 1e3) for name, factory in factories.items()]
    _progress(f"time to first token measured; {time.perf_counter() - began:,.0f} s so far")
    report = Report(limits.max_input_tokens, limits.max_recent_turns, seed, tokens, bookkeeping, ttfts, cut=cut)
    report.tokenization_us = tokenization_us(repeats=repeats)
    report.new_text_us = tokenization_us(repeats=repeats, with_reply=True)
    base = limits.max_input_tokens
    for budget in budgets if budgets is not None else (base, base * 3 // 2, base * 2):
        roomier = Limits(budget, limits.max_recent_turns)
        counts = {}
        for name in map(memora_name, policies.names()):
            strategy, _ = replay(factories[name], longest, roomier)
            counts[name] = sum(1 for c in strategy.backend.calls if c.kind == "summary")
        report.summaries_by_budget[budget] = counts
    report.seconds = time.perf_counter() - began
    return report
