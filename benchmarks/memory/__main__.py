"""``python -m benchmarks.memory [--json PATH] [--quick] [--peers [BUDGETS]] [--cut RULE] [--jobs N] [--plots DIR]``: compares
memory strategies offline.

``--peers`` adds the cost-against-retention sweep: Memora's strategies beside LangChain, langmem, LlamaIndex and the
OpenAI Agents SDK (``pip install -r requirements-bench.txt``) at each summary cap (``--caps``), a peer's knob tuned on
``--seed`` at each budget, cap and cut rule, and every figure from the held-out ``--held-out`` seeds, replays played
over ``--jobs`` processes with a progress line (and the time left) after each; a peer whose library is missing is named, with the
pip command, and left out. ``--plots DIR`` writes one cost-against-retention PNG per budget (needs matplotlib).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.memory.peers import installed_peers, missing_libraries, missing_message
from benchmarks.memory.recording import CUT_RULES, DEFAULT_CUT
from benchmarks.memory.replays import default_workers
from benchmarks.memory.report import markdown
from benchmarks.memory.run import run
from benchmarks.memory.strategies import Limits
from benchmarks.memory.sweep import CAPS, HELD_OUT_SEEDS, TURNS, sweep


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    parser.add_argument("--seed", type=int, default=7, help="seed of the scripted conversations (default 7)")
    parser.add_argument("--delay-ms", type=float, default=50.0, help="per-request delay for the time-to-first-token run")
    parser.add_argument("--budget", type=int, default=Limits().max_input_tokens, help="max_input_tokens (default 1000)")
    parser.add_argument("--recent-turns", type=int, default=Limits().max_recent_turns, help="max_recent_turns (default 3)")
    parser.add_argument("--quick", action="store_true", help="short conversations and histories, for a smoke test")
    parser.add_argument(
        "--peers",
        nargs="?",
        const="",
        metavar="BUDGETS",
        help="also run the peer memory libraries (requirements-bench.txt) on the longest script, "
        "at --budget or at these comma-separated budgets (e.g. 1000,2000,4000)",
    )
    parser.add_argument("--caps", default=",".join(map(str, CAPS)), help=f"summary caps of the sweep (default {','.join(map(str, CAPS))})")
    parser.add_argument("--held-out", default=",".join(map(str, HELD_OUT_SEEDS)), help="held-out seeds of the sweep")
    parser.add_argument("--sweep-turns", type=int, default=TURNS, help=f"turns of each sweep conversation (default {TURNS})")
    parser.add_argument(
        "--cut",
        choices=CUT_RULES,
        default=DEFAULT_CUT,
        help="how an over-cap summary is cut: beginning (kept, as Memora's summarizer and a model's output cap do; "
        "the default) or newest (oldest lines dropped first); the sweep adds the other rule as a sensitivity row",
    )
    parser.add_argument("--jobs", type=int, default=default_workers(), help="worker processes of the sweep (default: 2 on 2+ cores)")
    parser.add_argument("--plots", metavar="DIR", help="write retention-cost-<budget>.png into DIR (with --peers)")
    args = parser.parse_args(argv)
    peer_budgets: tuple[int, ...] = ()
    if args.peers is not None:
        try:
            peer_budgets = tuple(int(b) for b in args.peers.split(",") if b.strip()) or (args.budget,)
        except ValueError:
            parser.error("--peers takes comma-separated budgets, e.g. --peers 1000,2000")
        missing = missing_libraries()
        if missing:
            print(missing_message(missing), file=sys.stderr)
    try:
        caps = tuple(int(c) for c in args.caps.split(",") if c.strip())
        held_out = tuple(int(s) for s in args.held_out.split(",") if s.strip())
    except ValueError:
        parser.error("--caps and --held-out take comma-separated whole numbers, e.g. --caps 60,200")
    if not caps or min(caps) < 1 or not held_out or args.seed in held_out:
        parser.error("--caps needs caps of 1 or more; --held-out needs seeds other than --seed (the tuning seed)")
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.plots and args.peers is None:
        parser.error("--plots needs --peers (the sweep it draws)")
    sweep_options = {"caps": caps, "seeds": held_out, "tuning_seed": args.seed, "turns": args.sweep_turns, "workers": args.jobs}
    if args.quick:
        sweep_options["turns"] = min(args.sweep_turns, 40)
    quick = dict(conversation_turns=(12, 30), history_turns=(10, 40), ttft_turns=8, repeats=3, budgets=()) if args.quick else {}
    report = run(
        seed=args.seed,
        delay_ms=args.delay_ms,
        limits=Limits(args.budget, args.recent_turns),
        cut=args.cut,
        **quick,  # type: ignore[arg-type]
    )
    if peer_budgets:
        began = time.perf_counter()
        report.peers_missing = missing = missing_libraries()
        peers = installed_peers(missing)
        points = sweep(peer_budgets, peers, recent_turns=args.recent_turns, cut=args.cut, progress=_progress, **sweep_options)
        report.sweep, report.seconds = points, report.seconds + time.perf_counter() - began
    print(markdown(report))
    if args.plots:
        try:
            from benchmarks.memory.plot import write_plots
        except ImportError:
            print("No plots: matplotlib is not installed (pip install -r requirements-bench.txt).", file=sys.stderr)
        else:
            for path in write_plots(report.sweep, Path(args.plots)):
                print(f"Wrote {path}", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report.as_json(), out, ensure_ascii=False, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
