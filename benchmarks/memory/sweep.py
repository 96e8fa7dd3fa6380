"""Cost against retention, like for like: every strategy and peer at the same summary caps, on held-out seeds.

For each budget and each summary cap in ``CAPS``, Memora's strategies and every
installed peer (``peers.py``) replay the same scripts through recording backends
with that cap. A peer's token knob is tuned on the tuning seed only
(``tune_knob``, once per budget), then every figure is measured on the held-out seeds: cost at
list prices, the retention probe (``retention.py``), reply requests over the
budget and reply requests without the user's current message, per seed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.memory.recording import SUMMARY_TOKEN_CAP
from benchmarks.memory.run import PAGE, REFERENCE, Factory, TokenFigures, replay, strategies, token_figures
from benchmarks.memory.script import make_script
from benchmarks.memory.strategies import Limits

CAPS = (60, 100, 150, 200, 300)
"""The summary caps of the sweep, in tokens (the watermark's former cap was 60 at 1,000 tokens; the article's is 200)."""

TUNING_SEED = 7
HELD_OUT_SEEDS = (11, 12)
TURNS = 200
"""Turns of each scripted conversation in the sweep."""

OURS = ("memora", PAGE, REFERENCE)
"""Memora's strategies in the sweep: the article's rule, the watermark policy with prefold, and the article as written."""

KNOB_STEP = 0.1
"""``tune_knob`` tries a peer's token knob from its default down in steps of this share of the budget..."""

KNOB_FLOOR = 0.4
"""... down to this share of the budget."""


@dataclass(frozen=True)
class Point:
    """One strategy at one budget and summary cap, over the held-out seeds.

    ``retention``, ``stale`` and ``missing`` are shares of every probed fact of
    every seed pooled; ``usd`` and ``summaries_per_turn`` are means over seeds;
    ``over_budget`` and ``without_current`` are per seed, in ``seeds`` order.
    ``knob`` is the tuned value of a peer's token knob (None for Memora's strategies).
    """

    strategy: str
    label: str
    budget: int
    cap: int
    knob: int | None
    seeds: tuple[int, ...]
    turns: int
    usd: float
    retention: float
    stale: float
    missing: float
    summaries_per_turn: float
    over_budget: tuple[int, ...]
    without_current: tuple[int, ...]

    @property
    def holds(self) -> bool:
        """No reply request over the budget and none without the user's current message, on any seed."""
        return not any(self.over_budget) and not any(self.without_current)


def measure(factory: Factory, limits: Limits, cap: int, seeds: Sequence[int], turns: int) -> list[TokenFigures]:
    """The figures of one strategy on each seed's script, with every summary capped at ``cap``."""
    out = []
    for seed in seeds:
        strategy, _ = replay(factory, make_script(turns, seed), limits, summary_cap=cap)
        out.append(token_figures(strategy.name, strategy.backend, turns, limits.max_input_tokens, limits.max_recent_turns))
    return out


def point(strategy: str, figures: Sequence[TokenFigures], budget: int, cap: int, seeds: Sequence[int], knob: int | None) -> Point:
    probed = sum(f.facts_probed for f in figures) or 1
    return Point(
        strategy=strategy,
        label=figures[0].strategy,
        budget=budget,
        cap=cap,
        knob=knob,
        seeds=tuple(seeds),
        turns=figures[0].turns,
        usd=statistics.fmean(f.usd_per_100_turns["total"] for f in figures),
        retention=sum(f.recalled for f in figures) / probed,
        stale=sum(f.stale for f in figures) / probed,
        missing=sum(f.missing for f in figures) / probed,
        summaries_per_turn=statistics.fmean(f.calls_per_turn["summary"] for f in figures),
        over_budget=tuple(f.over_budget for f in figures),
        without_current=tuple(f.without_current for f in figures),
    )


def tune_knob(
    make: Callable[[int | None], Factory], default: int, limits: Limits, cap: int, seed: int = TUNING_SEED, turns: int = TURNS
) -> int:
    """A peer's token knob, tuned on ``seed`` only: of the values from ``default`` down to ``KNOB_FLOOR`` of the budget,
    in steps of ``KNOB_STEP`` of it, the one with the best retention whose replies all fit the budget and all carry the
    user's current message (the cheaper on a tie). If none does, the one with the fewest such failures."""
    budget = limits.max_input_tokens
    step = max(1, int(budget * KNOB_STEP))
    tried = []
    for knob in range(default, max(step, int(budget * KNOB_FLOOR)) - 1, -step):
        (figures,) = measure(make(knob), limits, cap, (seed,), turns)
        failures = figures.over_budget + figures.without_current
        tried.append((failures, -figures.retention, figures.usd_per_100_turns["total"], knob))
    return min(tried)[-1]


def sweep(
    budgets: Sequence[int],
    peer_keys: Sequence[str],
    *,
    caps: Sequence[int] = CAPS,
    recent_turns: int = 3,
    seeds: Sequence[int] = HELD_OUT_SEEDS,
    tuning_seed: int = TUNING_SEED,
    turns: int = TURNS,
    progress: Callable[[str], None] = lambda line: None,
) -> list[Point]:
    """Every point of the sweep: each budget, each cap, Memora's strategies (``OURS``) then each peer in ``peer_keys``.

    A peer's knob is tuned once per budget, at the default cap (``SUMMARY_TOKEN_CAP``), on the tuning seed; the
    held-out seeds show whether it still holds at the other caps (``Point.holds``).
    """
    from benchmarks.memory.peers import PEERS, peer_factory

    ours = strategies()
    points = []
    for budget in budgets:
        limits = Limits(budget, recent_turns)
        knobs: dict[str, int | None] = {}
        for key in peer_keys:
            cls = PEERS[key][1]
            tune = cls.tunable
            knobs[key] = (
                tune_knob(lambda k, key=key: peer_factory(key, k), cls.default_knob(limits), limits, SUMMARY_TOKEN_CAP, tuning_seed, turns)
                if tune
                else None
            )
        progress(f"budget {budget:,}: knobs tuned on seed {tuning_seed}: {knobs}")
        for cap in caps:
            for name in OURS:
                points.append(point(name, measure(ours[name], limits, cap, seeds, turns), budget, cap, seeds, None))
            for key in peer_keys:
                points.append(point(key, measure(peer_factory(key, knobs[key]), limits, cap, seeds, turns), budget, cap, seeds, knobs[key]))
            progress(f"budget {budget:,}, cap {cap}: done")
    return points


def dominating(points: Sequence[Point], ours: str) -> list[tuple[Point, Point]]:
    """(Memora's point, peer point) pairs at equal budget and cap where a peer that holds is both cheaper and better.

    Only peers that hold (``Point.holds``) count: a memory that goes over the budget or drops the question is
    not a cheaper way to do the same job.
    """
    mine = {(p.budget, p.cap): p for p in points if p.strategy == ours}
    out = []
    for p in points:
        m = mine.get((p.budget, p.cap))
        if m is None or p.strategy in OURS or not p.holds:
            continue
        if p.usd < m.usd and p.retention > m.retention:
            out.append((m, p))
    return out
