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
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.memory.questions import Answered, ask
from benchmarks.memory.retention import Recall, due_facts, has_current_message, probe
from benchmarks.memory.script import Script, make_script
from memora.backends.base import Backend, BackendError, Completion, ReplyRequest, ServerProfile, SummaryRequest, drain
from memora.memory import ContextBudgetError, ShortTermMemory
from memora.text.messages import Message
from memora.text.prompts import SYSTEM_PROMPT


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
    through the wrapper (counting by the server's own tokenizer above all) as without it.
    """

    inner: Backend
    script: Script
    turn: int = 0
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
        # A retried request (the memory folds more and sends again) replaces its turn's first probe.
        if len(self.recalls) == self.turn:
            self.recalls.pop()
        self.recalls.extend([Recall()] * (self.turn - 1 - len(self.recalls)))
        said = self.script.user_messages[self.turn - 1]
        sent = uncopied(request.messages, self.script.user_messages[: self.turn - 1])
        self.recalls.append(probe(sent, self._due[self.turn - 1], said))
        self.without_current += not has_current_message(request.messages, said)
        if self.turn in self.ask_at:
            self.answered[self.turn] = ask(self.inner, request, self._due[self.turn - 1])
        return self.inner.stream_reply(request)

    def count_request(self, model: str, instructions: str, messages: Any) -> int | None:
        return self.inner.count_request(model, instructions, messages)

    def counting_source(self, model: str) -> str | None:
        return self.inner.counting_source(model)

    def summarize(self, request: SummaryRequest) -> Completion:
        self.summaries += 1
        completion = self.inner.summarize(request)
        self.written.append(WrittenSummary(self.turn, completion.text, completion.cut))
        return completion


def _squashed(text: str) -> str:
    return " ".join(text.split())


def uncopied(messages: Sequence[Message], said: Sequence[str]) -> list[Message]:
    """``messages`` with every word-for-word copy of a user message in ``said`` taken out of the summary (the system
    and developer messages, where Memora sends it), whitespace compared collapsed.

    A summary that pastes the transcript has remembered nothing by itself: the probe must not score it. The recent
    window's own messages are left whole, and so is a summary that states a fact in its own words or quotes part of
    a message.
    """
    copies = [copy for copy in map(_squashed, said) if copy]
    out = []
    for message in messages:
        if message.role in ("system", "developer"):
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


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _checkpoint(probing: ProbingBackend, number: int, refused: int) -> Checkpoint:
    recalls = probing.recalls
    last = recalls[-1] if recalls else Recall()
    total = Recall(sum(r.recalled for r in recalls), sum(r.stale for r in recalls), sum(r.missing for r in recalls))
    asked = [a for turn, a in probing.answered.items() if turn <= number]
    questions = sum(a.asked for a in asked)
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
            out.append(_checkpoint(probing, number, refused))
    return out


def play_without_memory(
    backend: Backend,
    model: str,
    script: Script,
    checkpoints: Sequence[int],
    recent_turns: int | None,
    ask_questions: bool = False,
    reply_tokens: int | None = None,
) -> list[Checkpoint]:
    """The reference rows: every previous pair sent (``recent_turns`` None, the ceiling: full history) or only the last
    ``recent_turns`` pairs and no summary (the floor), then the current message, with Memora's system prompt.

    No budget is held: a request the server refuses (its context window) is counted as refused and left out of
    the conversation, as a page would keep the message unsent.
    """
    probing = ProbingBackend(backend, script, ask_at=frozenset(checkpoints) if ask_questions else frozenset())
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
            out.append(_checkpoint(probing, number, refused))
    return out


def markdown(checkpoints: Sequence[Checkpoint]) -> str:
    def cell(share: float | None) -> str:
        return "n/a" if share is None else f"{share:.2f}"

    lines = [
        "| turn | facts due at this request | (a) sent at this request | (a) sent so far (stale / missing) "
        "| (b) answered correctly so far (questions) "
        "| requests without the current message | summary requests | turns refused |",
        "|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    for c in checkpoints:
        lines.append(
            f"| {c.turn} | {c.probed} | {cell(c.at_turn)} | {cell(c.so_far)} ({cell(c.stale_so_far)} / {cell(c.missing_so_far)}) "
            f"| {cell(c.answered_so_far)} ({c.asked}) | {c.without_current} | {c.summaries} | {c.refused} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory.real", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="the server's OpenAI-compatible /v1 URL")
    parser.add_argument("--model", required=True, help="the model name the server expects")
    parser.add_argument("--api-key-env", default="MEMORA_API_KEY", help="variable holding the API key (default MEMORA_API_KEY)")
    parser.add_argument("--turns", type=int, default=24, help="turns of the scripted conversation (default 24)")
    parser.add_argument("--every", type=int, default=8, help="a checkpoint every this many turns (default 8)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the script (default 11)")
    parser.add_argument("--policy", choices=("watermark", "window"), default="watermark", help="fold policy (default watermark)")
    parser.add_argument("--budget", type=int, default=1000, help="max_input_tokens (default 1000)")
    parser.add_argument("--recent-turns", type=int, default=3, help="max_recent_turns (default 3)")
    parser.add_argument("--summary-tokens", type=int, default=200, help="max_summary_tokens (default 200)")
    parser.add_argument("--reply-tokens", type=int, default=64, help="max_reply_tokens (default 64)")
    parser.add_argument("--context-window", type=int, default=None, help="the server's context window, if small (e.g. 2048)")
    parser.add_argument("--ask", action="store_true", help="also ask the model each due fact at the checkpoints (one request a fact)")
    parser.add_argument("--rows", action="store_true", help="also play the full history (ceiling) and the window only (floor)")
    parser.add_argument("--json", metavar="PATH", help="also write the checkpoints of each row as JSON to PATH")
    parser.add_argument("--summaries", metavar="PATH", help="also write the summaries the model wrote in Memora's row as JSON to PATH")
    args = parser.parse_args(argv)
    if args.turns < 1 or args.every < 1:
        parser.error("--turns and --every must be 1 or more")

    import openai

    from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend

    client = openai.OpenAI(base_url=args.base_url, api_key=os.environ.get(args.api_key_env) or NO_KEY, max_retries=0, timeout=300)
    written: list[WrittenSummary] = []
    rows = play_rows(ChatCompletionsBackend(client), args, written)
    print(f"Retention probe, {args.model} at {args.base_url}: {args.policy} policy, budget {args.budget}, seed {args.seed}")
    print("(a): the share of due facts whose latest value was sent; (b): the share of probe questions answered with it.")
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
            json.dump([asdict(w) for w in written], out, indent=2, ensure_ascii=False)
    return 0


def play_rows(backend: Backend, args: argparse.Namespace, written: list[WrittenSummary] | None = None) -> dict[str, list[Checkpoint]]:
    """Memora's row, and with ``args.rows`` the full history (the ceiling) and the window only (the floor); ``written``
    receives the summaries the model wrote in Memora's row."""
    script = make_script(args.turns, args.seed)
    checkpoints = sorted({*range(args.every, args.turns + 1, args.every), args.turns})
    rows = {
        f"Memora, {args.policy} policy": play(
            backend,
            args.model,
            script,
            checkpoints,
            args.ask,
            written,
            max_input_tokens=args.budget,
            max_recent_turns=args.recent_turns,
            max_summary_tokens=args.summary_tokens,
            max_reply_tokens=args.reply_tokens,
            context_window=args.context_window,
            fold_policy=args.policy,
        )
    }
    if args.rows:
        for row, recent in (("full history (the ceiling)", None), ("window only, no summary (the floor)", args.recent_turns)):
            rows[row] = play_without_memory(backend, args.model, script, checkpoints, recent, args.ask, args.reply_tokens)
    return rows


if __name__ == "__main__":
    sys.exit(main())
