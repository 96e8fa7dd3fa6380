"""The peer sweep's wall time under two revisions of the bench, on the same replays, side by side in one run.

    python benchmarks/sweep_ab.py BASE [--budget 1000] [--cap 200] [--turns 200] [--jobs 2] [--rounds 1]

``BASE`` is a git revision from before the replays became jobs (``benchmarks.memory.replays``). Each round
runs, each in a fresh process, BASE's ``sweep.sweep`` at one budget and cap (its knobs tuned at that cap, from
a peer's default down to 40% of the budget, then Memora's three strategies and every installed peer on the
held-out seeds 11 and 12), then the working tree's ``replays.Replayer`` on exactly those replays (the same
strategies, knobs, cap and seeds, BASE's tuned knobs included) with ``--jobs`` workers. The two sides differ
in the bench's figures (cut rule, probe), not in the work: same libraries, same turns, same number of replays.
Run it with the Python that has the peer libraries (requirements-bench.txt). Prints each side's seconds and
the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bookkeeping_ab import checkout

BASE_CHILD = """
import ast, json, sys, time
from benchmarks.memory.peers import installed_peers
from benchmarks.memory.sweep import sweep
budget, cap, turns = (int(a) for a in sys.argv[1:4])
knobs = {}
def keep(line):
    if "knobs tuned" in line:
        knobs.update(ast.literal_eval(line.split(": ", 2)[2]))  # the dict BASE prints
began = time.perf_counter()
sweep([budget], installed_peers(), caps=(cap,), turns=turns, progress=keep)
print(json.dumps({"seconds": time.perf_counter() - began, "knobs": knobs}))
"""

NEW_CHILD = """
import json, sys, time
from benchmarks.memory.peers import PEERS, installed_peers
from benchmarks.memory.replays import Progress, Replay, Replayer
from benchmarks.memory.strategies import Limits
budget, cap, turns, jobs = (int(a) for a in sys.argv[1:5])
knobs = json.loads(sys.argv[5])
step = int(budget * 0.1)
todo = []
for key in installed_peers():
    cls = PEERS[key][1]
    if cls.tunable:
        default = cls.default_knob(Limits(budget, 3))
        todo += [Replay(key, k, budget, 3, cap, "beginning", 7, turns) for k in range(default, max(step, int(budget * 0.4)) - 1, -step)]
for name in ("memora", "memora-watermark+prefold", "article-v0.7", *installed_peers()):
    todo += [Replay(name, knobs.get(name), budget, 3, cap, "beginning", seed, turns) for seed in (11, 12)]
began = time.perf_counter()
Replayer(Progress(len(todo), lambda line: None), workers=jobs).run(todo)
print(json.dumps({"seconds": time.perf_counter() - began, "replays": len(todo)}))
"""


def run_child(code: str, tree: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--cap", type=int, default=200)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    shape = [str(args.budget), str(args.cap), str(args.turns)]
    base_s, new_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        base = checkout(args.base, Path(tmp) / "base")
        for _ in range(args.rounds):
            old = run_child(BASE_CHILD, base, *shape)
            new = run_child(NEW_CHILD, Path.cwd(), *shape, str(args.jobs), json.dumps(old["knobs"]))
            base_s.append(old["seconds"])
            new_s.append(new["seconds"])
            print(f"round: {args.base} {old['seconds']:.1f} s, working tree {new['seconds']:.1f} s ({new['replays']} replays)", flush=True)
    b, n = statistics.median(base_s), statistics.median(new_s)
    print(f"budget {args.budget:,}, cap {args.cap}, {args.turns} turns: {args.base} {b:.1f} s, working tree {n:.1f} s "
          f"with {args.jobs} workers: {b / n:.2f}x faster (median of {args.rounds})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
