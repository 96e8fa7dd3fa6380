"""``python -m benchmarks.memory.real_table RUN.json ...``: the rows of several real-model runs side by side.

Each ``RUN.json`` is what ``python -m benchmarks.memory.real --json`` wrote for one seed (one row or many); its
seed is read from its name (``a-11-watermark.json``: the first number standing alone). The table shows, per row
and seed, at the last checkpoint: (a) the share of due facts sent so far, (b) the share of probe questions answered
correctly (how many were asked), $ per 100 turns as the bench prices it, and the reply / summary requests over the
budget by o200k_base. A row missing for a seed shows a dash.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cell:
    """One row at one seed, at its last checkpoint."""

    sent: float | None
    answered: float | None
    asked: int
    usd: float
    replies_over: int
    summaries_over: int
    largest_summary: int

    def markdown(self) -> str:
        def share(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.2f}"

        return (
            f"{share(self.sent)} / {share(self.answered)} ({self.asked}) | ${self.usd:.4f} "
            f"| {self.replies_over} / {self.summaries_over} ({self.largest_summary:,})"
        )


def seed_of(path: str) -> int:
    """The seed in a run file's name (``a-11-watermark.json``); ValueError when it names none."""
    found = re.search(r"(?:^|[-_.])(\d+)(?=[-_.])", Path(path).name)
    if not found:
        raise ValueError(f"no seed in the name {path!r}: name it like run-11.json")
    return int(found.group(1))


def cells(paths: Sequence[str]) -> dict[str, dict[int, Cell]]:
    """Row -> seed -> its last checkpoint, over every run file; a later file's row replaces an earlier one's."""
    out: dict[str, dict[int, Cell]] = {}
    for path in paths:
        seed = seed_of(path)
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
        for row, checkpoints in rows.items():
            last = checkpoints[-1]
            out.setdefault(row, {})[seed] = Cell(
                last["so_far"],
                last["answered_so_far"],
                last["asked"],
                last.get("usd_per_100_turns", 0.0),
                last.get("replies_over_budget", 0),
                last.get("summaries_over_budget", 0),
                last.get("largest_summary_input", 0),
            )
    return out


def table(found: dict[str, dict[int, Cell]]) -> str:
    seeds = sorted({seed for by_seed in found.values() for seed in by_seed})
    head = "| row | " + " | ".join(
        f"seed {s}: (a) / (b) (questions) | $ per 100 turns | over budget: replies / summaries (largest summary)" for s in seeds
    )
    lines = [head + " |", "|---" * (1 + 3 * len(seeds)) + "|"]
    for row, by_seed in found.items():
        lines.append(f"| {row} | " + " | ".join(by_seed[s].markdown() if s in by_seed else "- | - | -" for s in seeds) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory.real_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN.json")
    args = parser.parse_args(argv)
    try:
        print(table(cells(args.runs)))
    except (OSError, ValueError, KeyError) as error:
        print(f"real_table: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
