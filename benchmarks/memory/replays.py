"""The sweep's replays as jobs: each plays one strategy or peer on one seed's script, once, in worker processes.

A ``Replay`` names everything a replay's figures depend on, so two equal jobs
have equal figures: ``Replayer`` plays each distinct job once and answers a
repeat from its first run. A memory that never summarizes (``NEVER_SUMMARIZES``)
sends the same requests whatever the summary cap and cut rule, so its jobs are
played once per budget and seed. Jobs run over ``workers`` processes (the
replays are CPU-bound Python: threads would not help), and ``Progress`` says
after each one how many are done and about how long the rest will take.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from functools import cache

from benchmarks.memory.recording import DEFAULT_CUT, CutRule
from benchmarks.memory.run import Factory, TokenFigures, replay, strategies, token_figures
from benchmarks.memory.script import Script, make_script
from benchmarks.memory.strategies import Limits

NEVER_SUMMARIZES = frozenset({"full-history", "agents-trimming"})
"""Strategies and peers that send no summary request: their figures do not depend on the cap or the cut rule."""

SLOW = ("llamaindex-memory",)
"""Peers whose replays take several times the others' (LlamaIndex ``Memory``: its SQL chat store and its
prompt templates): handed out first, so that a worker is not left with one at the end while the other idles."""


@dataclass(frozen=True)
class Replay:
    """One replay: ``strategy`` (a name of ``run.strategies`` or a key of ``peers.PEERS``) with its token ``knob``
    (None: none, or the peer's default) at ``budget`` and ``recent_turns``, summaries capped at ``cap`` tokens and
    cut by ``cut``, on the ``turns``-turn script of ``seed``."""

    strategy: str
    knob: int | None
    budget: int
    recent_turns: int
    cap: int
    cut: CutRule
    seed: int
    turns: int

    def canonical(self) -> Replay:
        """The job whose figures this one's equal: cap and cut left out for a memory that never summarizes."""
        if self.strategy in NEVER_SUMMARIZES:
            return replace(self, cap=0, cut=DEFAULT_CUT)
        return self

    def describe(self) -> str:
        knob = f" knob {self.knob:,}" if self.knob is not None else ""
        return f"{self.strategy}{knob}, budget {self.budget:,}, cap {self.cap}, cut {self.cut}, seed {self.seed}"


@cache
def _script(turns: int, seed: int) -> Script:
    return make_script(turns, seed)


def _factory(job: Replay) -> Factory:
    ours = strategies()
    if job.strategy in ours:
        return ours[job.strategy]
    from benchmarks.memory.peers import peer_factory

    return peer_factory(job.strategy, job.knob)


def play(job: Replay) -> tuple[TokenFigures, float]:
    """Plays ``job``; returns its figures and the seconds it took."""
    began = time.perf_counter()
    limits = Limits(job.budget, job.recent_turns)
    strategy, _ = replay(_factory(job), _script(job.turns, job.seed), limits, summary_cap=job.cap, cut=job.cut)
    figures = token_figures(strategy.name, strategy.backend, job.turns, job.budget, job.recent_turns)
    return figures, time.perf_counter() - began


@dataclass
class Progress:
    """Says, after each replay, how many of ``total`` are done and about how long the rest will take.

    The estimate is the mean time per replay so far times the replays left, over the workers together;
    it is rough while few are done, and replays of the slow peers come first (``SLOW``), so it starts high.
    """

    total: int
    say: Callable[[str], None]
    done: int = 0
    began: float = field(default_factory=time.perf_counter)

    def step(self, job: Replay, seconds: float) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.began
        left = elapsed / self.done * max(0, self.total - self.done)
        self.say(f"replay {self.done}/{self.total}, {job.describe()}: {seconds:.1f} s; {elapsed:,.0f} s so far, about {left:,.0f} s left")


def distinct(jobs: Iterable[Replay]) -> list[Replay]:
    """The distinct canonical jobs among ``jobs``, slow peers first, in order otherwise."""
    unique = list(dict.fromkeys(job.canonical() for job in jobs))
    return sorted(unique, key=lambda job: job.strategy not in SLOW)


class Replayer:
    """Plays replay jobs over ``workers`` processes (1: in this process), each distinct job once.

    ``run`` returns the figures of every job asked for, in order; a job already played (by an earlier ``run``
    too) is not played again.
    """

    def __init__(self, progress: Progress, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be 1 or more, not {workers}")
        self.progress = progress
        self.workers = workers
        self.played: dict[Replay, TokenFigures] = {}

    def run(self, jobs: Sequence[Replay]) -> list[TokenFigures]:
        todo = [job for job in distinct(jobs) if job not in self.played]
        if self.workers == 1 or len(todo) < 2:
            for job in todo:
                self._keep(job, *play(job))
        else:
            with ProcessPoolExecutor(max_workers=min(self.workers, len(todo))) as pool:
                running = {pool.submit(play, job): job for job in todo}
                for future in as_completed(running):
                    self._keep(running[future], *future.result())
        return [self.played[job.canonical()] for job in jobs]

    def _keep(self, job: Replay, figures: TokenFigures, seconds: float) -> None:
        self.played[job] = figures
        self.progress.step(job, seconds)


def default_workers() -> int:
    """Two worker processes where the machine has two cores or more, else one."""
    return min(2, os.cpu_count() or 1)
