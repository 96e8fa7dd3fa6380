"""``python -m benchmarks.memory [--json PATH] [--quick] [--peers [BUDGETS]]``: compares memory strategies offline.

``--peers`` adds LangChain, langmem, LlamaIndex and the OpenAI Agents SDK (``pip install -r requirements-bench.txt``);
a peer whose library is missing is named, with the pip command, and left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from benchmarks.memory.peers import missing_libraries, missing_message
from benchmarks.memory.report import markdown
from benchmarks.memory.run import run
from benchmarks.memory.strategies import Limits


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__)
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    parser.add_argument("--batch", type=int, default=3, help="fold_batch_turns for the batched strategy (default 3)")
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
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be 1 or more")
    peer_budgets: tuple[int, ...] = ()
    if args.peers is not None:
        try:
            peer_budgets = tuple(int(b) for b in args.peers.split(",") if b.strip()) or (args.budget,)
        except ValueError:
            parser.error("--peers takes comma-separated budgets, e.g. --peers 1000,2000")
        missing = missing_libraries()
        if missing:
            print(missing_message(missing), file=sys.stderr)
    quick = dict(conversation_turns=(12, 30), history_turns=(10, 40), ttft_turns=8, repeats=3, budgets=()) if args.quick else {}
    report = run(
        batch=args.batch,
        seed=args.seed,
        delay_ms=args.delay_ms,
        limits=Limits(args.budget, args.recent_turns),
        peer_budgets=peer_budgets,
        **quick,  # type: ignore[arg-type]
    )
    print(markdown(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report.as_json(), out, ensure_ascii=False, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
