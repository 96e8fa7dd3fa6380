"""``python -m benchmarks.memory.real``: the retention probe against a real model on any OpenAI-compatible server.

Plays a scripted conversation with planted facts (``script.py``) through Memora's
``ShortTermMemory`` on the Chat Completions backend, so that the model itself
writes every summary, and probes each reply request for the facts last stated 4
or more turns earlier (``retention.py``). Prints the recall at each checkpoint:
at that turn's request, and over every request so far. With ``--ask`` the model is
also asked each fact due at a checkpoint (``questions.py``): whether it answers with
the latest value from what it was sent. With ``--rows`` the same script is also played
with the full history (the ceiling) and with the window only, no summary (the floor). With
``--summaries`` the summaries the model wrote for Memora's row are saved, to read what it kept.
Example, a llama.cpp server on port 8080::

    python -m benchmarks.memory.real --base-url http://127.0.0.1:8080/v1 --model smollm2 --turns 24 --every 8

The API key, when the server needs one, is read from the variable that ``--api-key-env``
names (default ``MEMORA_API_KEY``) and never printed. Costs real requests: about
``--turns`` replies and a summary every few turns; ``--ask``, one more a fact due at each
checkpoint; ``--rows``, two more plays without a memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

from benchmarks.memory.questions import Answered, ask
from benchmarks.memory.recording import Call
from benchmarks.memory.retention import Recall, due_facts, has_current_message, probe
from benchmarks.memory.run import PRICED_MODEL, list_price, usd_per_100_turns
from benchmarks.memory.script import Script, make_script
from memora.backends.base import Backend, BackendError, Completion, ReplyRequest, ServerProfile, SummaryRequest, drain
from memora.memory import DEFAULT_MODEL, ContextBudgetError, ShortTermMemory
from memora.text.messages import Message
from memora.text.prompts import SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter, count_text


@dataclass(frozen=True)
class WrittenSummary:
    """A summary the model wrote during turn ``turn``; ``cut`` when the server stopped it at its output cap."""

    turn: int
    text: str
    cut: bool


@dataclass
class ProbingBackend:
    """Wraps a real backend: probes each reply request of turn ``turn`` of ``script`` before sending it on.

    Every other member of the ``Backend`` Protocol is the inner backend's, so the memory sees the same capabilities
    through the wrapper (counting by the server's own tokenizer above all) as without it. Each reply and summary
    request is also recorded as the bench's recorder records it (``calls``: o200k_base counts of what was sent and
    what came back, ``after_reply`` stamped), so ``run.token_figures`` prices a real run as it prices a replay; the
    probe questions are the measurement's, not the memory's, and are not recorded.

    A peer library (``real_peers``) names the bench's model and sets no output cap on its replies: with ``model``
    set, every reply request is sent for that model, capped at ``reply_tokens`` unless it has a cap of its own.
    """

    inner: Backend
    script: Script
    turn: int = 0
    model: str | None = None
    reply_tokens: int | None = None
    summary_cap: int = 200
    """The output cap of a peer's summary request (Memora's requests carry their own)."""
    budget: int | None = None
    """The budget the row is held to: requests above it, by o200k_base, are counted (``Checkpoint.over_budget``)."""
    after_reply: bool = False
    """Set by a peer that summarizes after its reply (LangChain's ``save_context``)."""
    calls: list[Call] = field(default_factory=list)
    recalls: list[Recall] = field(default_factory=list)
    without_current: int = 0
    summaries: int = 0
    ask_at: frozenset[int] = frozenset()
    """Turns at whose reply request the model is also asked each fact due (``questions.ask``)."""
    answered: dict[int, Answered] = field(default_factory=dict)
    """Turn -> the probe questions asked at its reply request; a retried request's replace its first."""
    written: list[WrittenSummary] = field(default_factory=list)
    """Every summary the model wrote, in order, as it returned it."""

    def __post_init__(self) -> None:
        self._due = due_facts(self.script)

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def offline(self) -> bool:
        return self.inner.offline

    @property
    def profile(self) -> ServerProfile:
        return self.inner.profile

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        if self.model is not None:
            request = replace(request, model=self.model, max_output_tokens=request.max_output_tokens or self.reply_tokens)
        # A retried request (the memory folds more and sends again) replaces its turn's first probe.
        if len(self.recalls) == self.turn:
            self.recalls.pop()
        self.recalls.extend([Recall()] * (self.turn - 1 - len(self.recalls)))
        said = self.script.user_messages[self.turn - 1]
        sent = uncopied(request.messages, self.script.user_messages[: self.turn - 1], said)
        self.recalls.append(probe(sent, self._due[self.turn - 1], said))
        self.without_current += not has_current_message(request.messages, said)
        if self.turn in self.ask_at:
            self.answered[self.turn] = ask(self.inner, request, self._due[self.turn - 1])
        return self._recorded(request)

    def _recorded(self, request: ReplyRequest) -> Iterator[str | Completion]:
        sent = LocalTokenCounter().count(DEFAULT_MODEL, request.instructions, request.messages)
        for item in self.inner.stream_reply(request):
            if isinstance(item, Completion):
                self.calls.append(Call(self.turn, "reply", sent, count_text(item.text)))
            yield item

    def record_summary(self, input_tokens: int, text: str, cut: bool) -> None:
        """Records a summary the model wrote from a request of ``input_tokens`` (o200k_base, framing included)."""
        self.summaries += 1
        self.calls.append(Call(self.turn, "summary", input_tokens, count_text(text), self.after_reply))
        self.written.append(WrittenSummary(self.turn, text, cut))

    def count_request(self, model: str, instructions: str, messages: Any) -> int | None:
        return self.inner.count_request(model, instructions, messages)

    def counting_source(self, model: str) -> str | None:
        return self.inner.counting_source(model)

    def summarize(self, request: SummaryRequest) -> Completion:
        completion = self.inner.summarize(request)
        sent = LocalTokenCounter().count(DEFAULT_MODEL, request.instructions, [Message("user", request.input_text)])
        self.record_summary(sent, completion.text, completion.cut)
        return completion


def _squashed(text: str) -> str:
    return " ".join(text.split())


def uncopied(messages: Sequence[Message], said: Sequence[str], current: str = "") -> list[Message]:
    """``messages`` with every word-for-word copy of a user message in ``said`` taken out of each message the memory
    wrote: every message but the model's replies and the user's own messages sent whole (the recent window, the
    current message), whitespace compared collapsed.

    A summary that pastes the transcript has remembered nothing by itself: the probe must not score it, wherever the
    memory puts it (Memora and most peers in a system message, LangChain's ``SummarizationMiddleware`` in a user
    message of its own). A summary that states a fact in its own words or quotes part of a message is left whole.
    """
    copies = [copy for copy in map(_squashed, said) if copy]
    verbatim = {*said, current}
    out = []
    for message in messages:
        if message.role != "assistant" and message.content not in verbatim:
            text = _squashed(message.content)
            for copy in copies:
                text = text.replace(copy, " ")
            message = Message(message.role, text)
        out.append(message)
    return out


@dataclass(frozen=True)
class Checkpoint:
    """Recall at one turn's reply request (``at_turn``) and over every request up to it (``so_far``)."""

    turn: int
    probed: int
    at_turn: float | None
    so_far: float | None
    stale_so_far: float | None
    missing_so_far: float | None
    without_current: int
    summaries: int
    refused: int
    """Turns whose message did not fit the budget with the instructions (``ContextBudgetError``), or, without a
    memory, that the server refused: no reply."""
    asked: int = 0
    answered_so_far: float | None = None
    """Probe questions asked at the checkpoints up to this one, and the share answered with the latest value."""
    usd_per_100_turns: float = 0.0
    """The reply and summary requests so far priced as the bench prices a replay (``run.usd_per_100_turns``, o200k_base
    counts at ``run.PRICED_MODEL``'s list prices); the probe questions are not the memory's and are not priced."""
    input_tokens: int = 0
    largest_reply_input: int = 0
    largest_summary_input: int = 0
    replies_over_budget: int = 0
    summaries_over_budget: int = 0
    """Reply and summary requests so far above the row's budget, by o200k_base (the server may count otherwise)."""


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def checkpoint(probing: ProbingBackend, number: int, refused: int) -> Checkpoint:
    recalls = probing.recalls
    last = recalls[-1] if recalls else Recall()
    total = Recall(sum(r.recalled for r in recalls), sum(r.stale for r in recalls), sum(r.missing for r in recalls))
    asked = [a for turn, a in probing.answered.items() if turn <= number]
    questions = sum(a.asked for a in asked)
    sizes = {kind: [c.input_tokens for c in probing.calls if c.kind == kind] for kind in ("reply", "summary")}
    budget = probing.budget

    def over(kind: str) -> int:
        return 0 if budget is None else sum(1 for tokens in sizes[kind] if tokens > budget)

    return Checkpoint(
        number,
        last.probed,
        _share(last.recalled, last.probed),
        _share(total.recalled, total.probed),
        _share(total.stale, total.probed),
        _share(total.missing, total.probed),
        probing.without_current,
        probing.summaries,
        refused,
        questions,
        _share(sum(a.correct for a in asked), questions),
        usd_per_100_turns(probing.calls, number, list_price())["total"],
        sum(sizes["reply"]) + sum(sizes["summary"]),
        max(sizes["reply"], default=0),
        max(sizes["summary"], default=0),
        over("reply"),
        over("summary"),
    )


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
    out = []
    refused = 0
    for number, text in enumerate(script.user_messages, start=1):
        probing.turn = number
        try:
            with memory.turn(text) as turn:
                turn.run()
        except ContextBudgetError:
            # A pasted paragraph can pass a small budget by the server's own count; the memory keeps the
            # conversation as it was, as the page does, and the probe says how many turns were refused.
            refused += 1
        if number in checkpoints:
            out.append(checkpoint(probing, number, refused))
    return out


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
    out = []
    refused = 0
    for number, text in enumerate(script.user_messages, start=1):
        probing.turn = number
        kept = history if recent_turns is None else history[len(history) - 2 * recent_turns :] if recent_turns else []
        request = ReplyRequest(model, SYSTEM_PROMPT, (*kept, Message("user", text)), max_output_tokens=reply_tokens)
        try:
            reply = drain(probing.stream_reply(request))
        except BackendError:
            refused += 1
        else:
            history += [Message("user", text), Message("assistant", reply.text)]
        if number in checkpoints:
            out.append(checkpoint(probing, number, refused))
    return out


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
    add("--policy", type=_names, default=("watermark",), help="fold policies, comma-separated: watermark, window (default watermark)")
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
    if unknown := [p for p in args.policy if p not in ("watermark", "window")]:
        parser.error(f"--policy: unknown {', '.join(unknown)} (watermark, window)")
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
        options = {"max_input_tokens": args.budget, "max_recent_turns": args.recent_turns, "max_summary_tokens": args.summary_tokens,
                   "max_reply_tokens": args.reply_tokens, "context_window": args.context_window, "fold_policy": policy}
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
