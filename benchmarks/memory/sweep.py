"""Cost against retention, like for like: every strategy and peer at the same summary caps, on held-out seeds.

For each budget, each summary cap in ``CAPS`` and the cut rule (``recording.CutRule``; the
other rule is added at the default cap as a sensitivity row), Memora's strategies and every
installed peer (``peers.py``) replay the same scripts through recording backends with that
cap. A peer's token knob is tuned on the tuning seed only, at each budget, cap and cut rule
(``best_knob`` over ``knob_grid``), then every figure is measured on the held-out seeds:
cost at list prices, the retention probe (``retention.py``), reply and summary requests over
the budget and reply requests without the user's current message, per seed. Every replay is
a ``replays.Replay`` job, played once, over worker processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.memory.recording import CUT_RULES, DEFAULT_CUT, SUMMARY_TOKEN_CAP, CutRule
from benchmarks.memory.replays import Progress, Replay, Replayer, default_workers, distinct
from benchmarks.memory.run import PAGE, RECOMMENDED, REFERENCE, TokenFigures
from benchmarks.memory.strategies import Limits

CAPS = (60, 100, 150, 200, 300)
"""The summary caps of the sweep, in tokens (the watermark's former cap was 60 at 1,000 tokens; the article's is 200)."""

TUNING_SEED = 7
HELD_OUT_SEEDS = (11, 12)
TURNS = 200
"""Turns of each scripted conversation in the sweep."""

OURS = (PAGE, RECOMMENDED, REFERENCE)
"""Memora's strategies in the sweep: what the page runs (the window with prefold), the recommended watermark with
prefold, and the article as written."""

KNOB_STEP = 0.1
"""``knob_grid`` tries a peer's token knob from the budget less what no library counts down in steps of this share
of the budget..."""

KNOB_FLOOR = 0.2
"""... down to this share of the budget, and the peer's own default besides."""


@dataclass(frozen=True)
class Point:
    """One strategy at one budget, summary cap and cut rule, over the held-out seeds.

    ``retention``, ``stale`` and ``missing`` are shares of every probed fact of
    every seed pooled; ``usd`` and ``summaries_per_turn`` are means over seeds;
    ``over_budget`` (reply requests), ``summary_over_budget`` (summary requests)
    and ``without_current`` are per seed, in ``seeds`` order; ``largest_summary_input``
    is the largest summary request of any seed. ``knob`` is the tuned value of a
    peer's token knob (None for Memora's strategies).
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
    summary_over_budget: tuple[int, ...] = ()
    largest_summary_input: int = 0
    cut: CutRule = DEFAULT_CUT

    @property
    def holds(self) -> bool:
        """No reply request over the budget and none without the user's current message, on any seed."""
        return not any(self.over_budget) and not any(self.without_current)

    @property
    def holds_every_request(self) -> bool:
        """``holds``, and no summary request over the budget either, on any seed."""
        return self.holds and not any(self.summary_over_budget)


def point(
    strategy: str,
    figures: Sequence[TokenFigures],
    budget: int,
    cap: int,
    seeds: Sequence[int],
    knob: int | None,
    cut: CutRule = DEFAULT_CUT,
) -> Point:
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
        summary_over_budget=tuple(f.summary_over_budget for f in figures),
        largest_summary_input=max(f.largest_summary_input for f in figures),
        cut=cut,
    )


def knob_grid(default: int, limits: Limits) -> list[int]:
    """The values ``best_knob`` tries, largest first: from the budget less what no library counts (the largest
    knob that can hold) down to ``KNOB_FLOOR`` of the budget in steps of ``KNOB_STEP`` of it, and ``default``."""
    from benchmarks.memory.peers import _fixed_tokens

    budget = limits.max_input_tokens
    step = max(1, int(budget * KNOB_STEP))
    grid = range(budget - _fixed_tokens(), max(1, int(budget * KNOB_FLOOR)) - 1, -step)
    return sorted({*grid, default}, reverse=True)


def best_knob(tried: Sequence[tuple[int, TokenFigures]]) -> int:
    """Of the (knob, figures on the tuning seed) ``tried``, the one with the best retention whose replies all fit the
    budget and all carry the user's current message (the cheaper on a tie, then the smaller); if none does, the one
    with the fewest such failures."""

    def rank(entry: tuple[int, TokenFigures]) -> tuple[int, float, float, int]:
        knob, f = entry
        return (f.over_budget + f.without_current, -f.retention, f.usd_per_100_turns["total"], knob)

    return min(tried, key=rank)[0]


def conditions(caps: Sequence[int], cut: CutRule = DEFAULT_CUT, sensitivity: bool = True) -> list[tuple[int, CutRule]]:
    """The (cap, cut rule) pairs of the sweep: every cap under ``cut``; with ``sensitivity``, the default cap (or the
    largest cap below it, or the smallest) under the other rule too."""
    out = [(cap, cut) for cap in caps]
    if sensitivity and caps:
        below = [cap for cap in caps if cap <= SUMMARY_TOKEN_CAP]
        at = max(below) if below else min(caps)
        out += [(at, other) for other in CUT_RULES if other != cut]
    return out


def sweep(
    budgets: Sequence[int],
    peer_keys: Sequence[str],
    *,
    caps: Sequence[int] = CAPS,
    recent_turns: int = 3,
    seeds: Sequence[int] = HELD_OUT_SEEDS,
    tuning_seed: int = TUNING_SEED,
    turns: int = TURNS,
    cut: CutRule = DEFAULT_CUT,
    sensitivity: bool = True,
    workers: int | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> list[Point]:
    """Every point of the sweep: each budget, each ``conditions`` pair, Memora's strategies (``OURS``) then each peer.

    Each tunable peer's knob is tuned at each budget, cap and cut rule on the tuning seed (``knob_grid``,
    ``best_knob``), then measured with the held-out seeds. ``workers`` processes play the replays (None: two where
    the machine has two cores). ``progress`` gets a line after each replay, with the time left.
    """
    from benchmarks.memory.peers import PEERS

    tunable = [key for key in peer_keys if PEERS[key][1].tunable]
    where = [(budget, cap, rule) for budget in budgets for cap, rule in conditions(caps, cut, sensitivity)]
    grids = {
        (budget, key): knob_grid(PEERS[key][1].default_knob(Limits(budget, recent_turns)), Limits(budget, recent_turns))
        for budget in budgets
        for key in tunable
    }
    tuning = {
        (budget, cap, rule, key): [
            Replay(key, knob, budget, recent_turns, cap, rule, tuning_seed, turns)
            for knob in grids[budget, key]
            if PEERS[key][1].accepts(knob, cap)
        ]
        for budget, cap, rule in where
        for key in tunable
    }
    # A peer that takes no knob of the grid at a cap (langmem's knob must exceed the cap) has no point there.
    tuning = {at: jobs for at, jobs in tuning.items() if jobs}
    names = (*OURS, *peer_keys)
    measured = [(b, cap, rule, name) for b, cap, rule in where for name in names if name not in tunable or (b, cap, rule, name) in tuning]
    planned = [Replay(name, None, budget, recent_turns, cap, rule, seed, turns) for budget, cap, rule, name in measured for seed in seeds]
    total = len(distinct(job for jobs in tuning.values() for job in jobs)) + len(distinct(planned))
    replayer = Replayer(Progress(total, progress), workers or default_workers())
    tuning_jobs = [job for jobs in tuning.values() for job in jobs]
    tried = dict(zip(tuning_jobs, replayer.run(tuning_jobs), strict=True))
    knobs = {at: best_knob([(job.knob, tried[job]) for job in jobs if job.knob is not None]) for at, jobs in tuning.items()}
    for (budget, cap, rule, key), knob in knobs.items():
        progress(f"budget {budget:,}, cap {cap}, cut {rule}: {key} tuned on seed {tuning_seed}: {knob:,}")
    jobs = {at: [Replay(at[3], knobs.get(at), at[0], recent_turns, at[1], at[2], seed, turns) for seed in seeds] for at in measured}
    flat = [job for per_seed in jobs.values() for job in per_seed]
    figures = dict(zip(flat, replayer.run(flat), strict=True))
    return [point(at[3], [figures[j] for j in per_seed], at[0], at[1], seeds, knobs.get(at), at[2]) for at, per_seed in jobs.items()]


def dominating(points: Sequence[Point], ours: str, every_request: bool = False) -> list[tuple[Point, Point]]:
    """(Memora's point, peer point) pairs at equal budget, cap and cut rule where a peer that holds is both cheaper
    and better.

    Only peers that hold (``Point.holds``; with ``every_request``, ``Point.holds_every_request``, summary requests
    within the budget too) count: a memory that goes over the budget or drops the question is not a cheaper way to
    do the same job.
    """
    mine = {(p.budget, p.cap, p.cut): p for p in points if p.strategy == ours}
    out = []
    for p in points:
        m = mine.get((p.budget, p.cap, p.cut))
        if m is None or p.strategy in OURS or not (p.holds_every_request if every_request else p.holds):
            continue
        if p.usd < m.usd and p.retention > m.retention:
            out.append((m, p))
    return out
