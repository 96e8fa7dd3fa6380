"""The bench's bookkeeping ratio of two revisions, side by side in one run.

    python benchmarks/bookkeeping_ab.py BASE [NEW] [--rounds 5] [--strategy memora-watermark+prefold]

``BASE`` and ``NEW`` are git revisions (``NEW`` defaults to the working tree). Each
round measures both, one after the other, each in a fresh process running
``benchmarks.memory.run.bookkeeping_us`` and ``tokenization_us``, and takes that
process's ratio (bookkeeping per turn / one tokenization of the new message), so
that load from elsewhere on the machine moves both sides of one ratio together.
Prints, per history length, the median ratio of each revision over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys
try:
    from benchmarks.memory.run import bookkeeping_us, strategies, tokenization_us
    from benchmarks.memory.strategies import Limits
except ImportError:  # a revision from before the bench left the product package
    from memora.bench.run import bookkeeping_us, strategies, tokenization_us
    from memora.bench.strategies import Limits
name, turns = sys.argv[1], [int(n) for n in sys.argv[2].split(",")]
us = bookkeeping_us({name: strategies()[name]}, turns, Limits(), repeats=11)[name]
unit = tokenization_us(repeats=11)
print(json.dumps({n: us[n] / unit for n in turns}))
"""


def checkout(revision: str, into: Path) -> Path:
    """The tree of ``revision``, exported (not checked out: the working tree is left alone)."""
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip())
    archive = subprocess.run(["git", "-C", str(root), "archive", revision], capture_output=True, check=True).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def ratios(tree: Path, strategy: str, turns: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, strategy, turns], cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("new", nargs="?", help="a revision; the working tree when left out")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--strategy", default="memora-watermark+prefold")
    parser.add_argument("--turns", default="10,100,1000", help="turns of history, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {args.base: checkout(args.base, Path(tmp) / "base")}
        trees[args.new or "working tree"] = checkout(args.new, Path(tmp) / "new") if args.new else Path.cwd()
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                samples[name].append(ratios(tree, args.strategy, args.turns))
    print(f"{args.strategy}: bookkeeping per turn / one tokenization of the new message, median of {args.rounds} rounds")
    for name, runs in samples.items():
        figures = {n: statistics.median(run[n] for run in runs) for n in runs[0]}
        print(f"  {name:>14}: " + ", ".join(f"{ratio:.1f}x at {n}" for n, ratio in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
