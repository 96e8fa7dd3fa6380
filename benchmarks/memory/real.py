"""``python -m benchmarks.memory.real``: the retention probe against a real model on any OpenAI-compatible server.

Plays a scripted conversation with planted facts (``script.py``) through Memora's
``ShortTermMemory`` on the Chat Completions backend, so that the model itself
writes every summary, and probes each reply request for the facts last stated 4
or more turns earlier (``retention.py``). Prints the recall at each checkpoint:
at that turn's request, and over every request so far. With ``--ask`` the model is
also asked each fact due at a checkpoint (``questions.py``): whether it answers with
the latest value from what it was sent. With ``--rows`` the same script is also played
with the full history (the ceiling) and with the window only, no summary (the floor). ``--policy`` takes
several fold policies (``policies.names()``, e.g. ``watermark,window``; empty: no Memora row), and ``--peers`` adds the peer libraries
(``real_peers.py``: each sends its own summary prompt to the same server; ``all``: every installed one). Every
row's reply and summary requests are priced as the bench prices a replay. With ``--summaries`` the summaries the
model wrote are saved, by row, to read what it kept. Example, a llama.cpp server on port 8080::

    python -m benchmarks.memory.real --base-url http://127.0.0.1:8080/v1 --model smollm2 --turns 24 --every 8

The API key, when the server needs one, is read from the variable that ``--api-key-env``
names (default ``MEMORA_API_KEY``) and never printed. Costs real requests: about
``--turns`` replies and a summary every few turns; ``--ask``, one more a fact due at each
checkpoint; ``--rows``, two more plays without a memory; each policy and peer, one more play.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial

from benchmarks.memory.probing import Checkpoint, ProbingBackend, WrittenSummary, play_script
from benchmarks.memory.run import PRICED_MODEL
from benchmarks.memory.script import Script, make_script
from memora.backends.base import drain
from memora.memory import ContextBudgetError, ShortTermMemory, policies
from memora.memory.backend import Backend, BackendError, ReplyRequest
from memora.text.messages import Message
from memora.text.prompts import SYSTEM_PROMPT


def play(
    backend: Backend,
    model: str,
    script: Script,
    checkpoints: Sequence[int],
    ask_questions: bool = False,
    written: list[WrittenSummary] | None = None,
    **memory_options: object,
) -> list[Checkpoint]:
    """Plays ``script`` through ``ShortTermMemory`` on ``backend``; returns the recall at each checkpoint turn, and with
    ``ask_questions`` the share of probe questions answered correctly there. ``written``, when given, receives each
    summary the model wrote."""
    probing = ProbingBackend(backend, script, ask_at=frozenset(checkpoints) if ask_questions else frozenset())
    probing.budget = memory_options.get("max_input_tokens")  # type: ignore[assignment]
    if written is not None:
        probing.written = written
    memory = ShortTermMemory(probing, model=model, **memory_options)  # type: ignore[arg-type]

    def play_turn(text: str) -> None:
        with memory.turn(text) as turn:
            turn.run()

    # A pasted paragraph can pass a small budget by the server's own count; the memory keeps the conversation as it
    # was, as the page does, and the probe says how many turns were refused.
    return play_script(probing, checkpoints, play_turn, ContextBudgetError)


def play_without_memory(
    backend: Backend,
    model: str,
    script: Script,
    checkpoints: Sequence[int],
    recent_turns: int | None,
    ask_questions: bool = False,
    reply_tokens: int | None = None,
    budget: int | None = None,
) -> list[Checkpoint]:
    """The reference rows: every previous pair sent (``recent_turns`` None, the ceiling: full history) or only the last
    ``recent_turns`` pairs and no summary (the floor), then the current message, with Memora's system prompt.

    No budget is held (``budget`` only counts the requests above it): a request the server refuses (its context
    window) is counted as refused and left out of the conversation, as a page would keep the message unsent.
    """
    probing = ProbingBackend(backend, script, ask_at=frozenset(checkpoints) if ask_questions else frozenset(), budget=budget)
    history: list[Message] = []

    def play_turn(text: str) -> None:
        kept = history if recent_turns is None else history[len(history) - 2 * recent_turns :] if recent_turns else []
        request = ReplyRequest(model, SYSTEM_PROMPT, (*kept, Message("user", text)), max_output_tokens=reply_tokens)
        reply = drain(probing.stream_reply(request))
        history.extend([Message("user", text), Message("assistant", reply.text)])

    return play_script(probing, checkpoints, play_turn, BackendError)


def markdown(checkpoints: Sequence[Checkpoint]) -> str:
    def cell(share: float | None) -> str:
        return "n/a" if share is None else f"{share:.2f}"

    lines = [
        "| turn | facts due at this request | (a) sent at this request | (a) sent so far (stale / missing) "
        "| (b) answered correctly so far (questions) "
        "| requests without the current message | summary requests | turns refused "
        "| $ per 100 turns | largest reply / summary request | replies / summaries over budget |",
        "|---:|---:|---:|---|---|---:|---:|---:|---:|---|---|",
    ]
    for c in checkpoints:
        lines.append(
            f"| {c.turn} | {c.probed} | {cell(c.at_turn)} | {cell(c.so_far)} ({cell(c.stale_so_far)} / {cell(c.missing_so_far)}) "
            f"| {cell(c.answered_so_far)} ({c.asked}) | {c.without_current} | {c.summaries} | {c.refused} "
            f"| ${c.usd_per_100_turns:.4f} | {c.largest_reply_input:,} / {c.largest_summary_input:,} "
            f"| {c.replies_over_budget} / {c.summaries_over_budget} |"
        )
    return "\n".join(lines)


def _names(text: str) -> tuple[str, ...]:
    return tuple(name for name in (part.strip() for part in text.split(",")) if name)


def _knob(text: str) -> tuple[str, int]:
    key, _, value = text.partition("=")
    try:
        return key.strip(), int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PEER=TOKENS, e.g. langchain-middleware=535, not {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory.real", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--base-url", required=True, help="the server's OpenAI-compatible /v1 URL")
    add("--model", required=True, help="the model name the server expects")
    add("--api-key-env", default="MEMORA_API_KEY", help="variable holding the API key (default MEMORA_API_KEY)")
    add("--turns", type=int, default=24, help="turns of the scripted conversation (default 24)")
    add("--every", type=int, default=8, help="a checkpoint every this many turns (default 8)")
    add("--seed", type=int, default=11, help="seed of the script (default 11)")
    add(
        "--policy",
        type=_names,
        default=("watermark",),
        help=f"fold policies, comma-separated: {', '.join(policies.names())} (default watermark)",
    )
    add("--peers", type=_names, default=(), help="peer libraries to play too, comma-separated keys of peers.PEERS, or 'all' installed")
    add("--knob", type=_knob, action="append", default=[], metavar="PEER=TOKENS", help="a peer's token knob (default: tuned at 1k)")
    add("--budget", type=int, default=1000, help="max_input_tokens (default 1000)")
    add("--recent-turns", type=int, default=3, help="max_recent_turns (default 3)")
    add("--summary-tokens", type=int, default=200, help="max_summary_tokens, and the peers' summary cap (default 200)")
    add("--reply-tokens", type=int, default=64, help="max_reply_tokens (default 64)")
    add("--context-window", type=int, default=None, help="the server's context window, if small (e.g. 2048)")
    add("--ask", action="store_true", help="also ask the model each due fact at the checkpoints (one request a fact)")
    add("--rows", action="store_true", help="also play the full history (ceiling) and the window only (floor)")
    add("--json", metavar="PATH", help="also write the checkpoints of each row as JSON to PATH")
    add("--summaries", metavar="PATH", help="also write the summaries the model wrote, by row, as JSON to PATH")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.turns < 1 or args.every < 1:
        parser.error("--turns and --every must be 1 or more")
    if unknown := [p for p in args.policy if p not in policies.names()]:
        parser.error(f"--policy: unknown {', '.join(unknown)} ({', '.join(policies.names())})")
    if args.peers or args.knob:
        from benchmarks.memory.real_peers import check_peers

        if problem := check_peers(args.peers, dict(args.knob)):
            parser.error(problem)

    import openai

    from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend

    client = openai.OpenAI(base_url=args.base_url, api_key=os.environ.get(args.api_key_env) or NO_KEY, max_retries=0, timeout=300)
    written: dict[str, list[WrittenSummary]] = {}
    rows = play_rows(ChatCompletionsBackend(client), args, written)
    print(f"Retention probe, {args.model} at {args.base_url}: budget {args.budget}, seed {args.seed}")
    print("(a): the share of due facts whose latest value was sent; (b): the share of probe questions answered with it.")
    print(f"$: the reply and summary requests priced as the bench prices them ({PRICED_MODEL} list prices, o200k_base counts).")
    for row, results in rows.items():
        print()
        print(f"### {row}")
        print()
        print(markdown(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({row: [asdict(c) for c in results] for row, results in rows.items()}, out, indent=2)
    if args.summaries:
        with open(args.summaries, "w", encoding="utf-8") as out:
            json.dump({row: [asdict(w) for w in texts] for row, texts in written.items()}, out, indent=2, ensure_ascii=False)
    return 0


def play_rows(
    backend: Backend, args: argparse.Namespace, written: dict[str, list[WrittenSummary]] | None = None
) -> dict[str, list[Checkpoint]]:
    """Memora's row under each of ``args.policy``, each of ``args.peers`` (``real_peers``), and with ``args.rows`` the
    full history (the ceiling) and the window only (the floor); ``written`` receives, by row, the summaries the model
    wrote. A line on stderr after each row says how long it took and about how long the rest will take."""
    script = make_script(args.turns, args.seed)
    checkpoints = sorted({*range(args.every, args.turns + 1, args.every), args.turns})
    plays: dict[str, Callable[[list[WrittenSummary]], list[Checkpoint]]] = {}
    for policy in args.policy:
        options = {
            "max_input_tokens": args.budget,
            "max_recent_turns": args.recent_turns,
            "max_summary_tokens": args.summary_tokens,
            "max_reply_tokens": args.reply_tokens,
            "context_window": args.context_window,
            "fold_policy": policy,
        }
        plays[f"Memora, {policy} policy"] = partial(play, backend, args.model, script, checkpoints, args.ask, **options)
    if args.peers:
        from benchmarks.memory.real_peers import peer_plays

        plays.update(peer_plays(backend, args, script, checkpoints))
    if args.rows:
        for row, recent in (("full history (the ceiling)", None), ("window only, no summary (the floor)", args.recent_turns)):
            plays[row] = partial(_without_memory, backend, args, script, checkpoints, recent)
    rows = {}
    began = time.perf_counter()
    for done, (row, play_row) in enumerate(plays.items(), start=1):
        texts: list[WrittenSummary] = []
        rows[row] = play_row(texts)
        if written is not None and texts:
            written[row] = texts
        elapsed = time.perf_counter() - began
        left = elapsed / done * (len(plays) - done)
        print(f"row {done}/{len(plays)}, {row}: {elapsed:,.0f} s so far, about {left:,.0f} s left", file=sys.stderr, flush=True)
    return rows


def _without_memory(
    backend: Backend, args: argparse.Namespace, script: Script, checkpoints: Sequence[int], recent: int | None, _: list[WrittenSummary]
) -> list[Checkpoint]:
    return play_without_memory(backend, args.model, script, checkpoints, recent, args.ask, args.reply_tokens, args.budget)


if __name__ == "__main__":
    sys.exit(main())
