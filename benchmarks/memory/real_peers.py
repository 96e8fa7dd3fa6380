"""The peer libraries on a real model: each plays the planted-fact script with the server writing its summaries.

Each peer of ``peers.py`` keeps its own memory class, its own summary prompt and its own fake model class; only
the fake's answer changes: ``ServerSummarizer`` sends the library's summary prompt, as the library built it, to the
same OpenAI-compatible server that answers the replies (Chat Completions, capped at the row's summary cap), records
what it sent, and hands the library the model's text as it wrote it. Replies, probes, probe questions and prices
go through ``real.ProbingBackend``, as Memora's rows do, so every row of ``python -m benchmarks.memory.real
--peers ...`` is measured alike.

Each peer's token knob defaults to the one the bench's sweep tuned at a 1,000-token budget and a 200-token cap,
the product's cut rule (``TUNED_AT_1000``, from the sweep table in docs/benchmarks.md); ``--knob PEER=TOKENS`` sets another.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from benchmarks.memory.peers import PEERS, installed_peers, missing_libraries
from benchmarks.memory.probing import Checkpoint, ProbingBackend, WrittenSummary, play_script
from benchmarks.memory.script import Script
from benchmarks.memory.strategies import Limits
from memora.backends.base import drain
from memora.memory import DEFAULT_MODEL
from memora.memory.backend import Backend, BackendError, ReplyRequest
from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter

TUNED_AT_1000: dict[str, int | None] = {
    "langmem": 335,
    "langchain-middleware": 535,
    "langchain-summary-buffer": 235,
    "llamaindex-memory": 735,
    "llamaindex-chat-summary": 535,
    "agents-trimming": None,
}
"""Peer -> the knob the sweep (``python -m benchmarks.memory --peers 1000``) tuned on seed 7 at budget 1,000, cap 200,
beginning kept; None: the peer has no knob."""


@dataclass
class ServerSummarizer:
    """A peer's summarizer on the real server (``peers.Summarizer``): the library's own prompt, the model's own text.

    ``sent`` holds every prompt as it was sent, in order. The model reads the prompt itself, so what the user said
    needs no bookkeeping here (``user_said`` does nothing).
    """

    probing: ProbingBackend
    model: str
    cap: int
    sent: list[tuple[Message, ...]] = field(default_factory=list)

    def user_said(self, text: str) -> None:
        return None

    def summarize(self, messages: Sequence[Message]) -> str:
        prompt = tuple(messages)
        self.sent.append(prompt)
        completion = drain(self.probing.inner.stream_reply(ReplyRequest(self.model, "", prompt, max_output_tokens=self.cap)))
        self.probing.record_summary(LocalTokenCounter().count(DEFAULT_MODEL, "", prompt), completion.text, completion.cut)
        return completion.text


def check_peers(keys: Sequence[str], knobs: dict[str, int]) -> str:
    """What is wrong with ``--peers keys`` and ``--knob`` ``knobs`` ("" when nothing): unknown keys, missing libraries."""
    named = [key for key in keys if key != "all"]
    if unknown := sorted({*named, *knobs} - set(PEERS)):
        return f"unknown peers {', '.join(unknown)}; known: {', '.join(PEERS)}"
    missing = missing_libraries()
    if absent := [key for key in named if PEERS[key][0] in missing]:
        return f"peers not installed here: {', '.join(absent)} (python -m pip install -r requirements-bench.txt)"
    return ""


def chosen(keys: Sequence[str]) -> list[str]:
    """The peers ``--peers`` names, in ``PEERS`` order; ``all``: every installed one."""
    if "all" in keys:
        return installed_peers(missing_libraries())
    return [key for key in PEERS if key in keys]


def play_peer(
    backend: Backend,
    model: str,
    script: Script,
    checkpoints: Sequence[int],
    key: str,
    knob: int | None,
    limits: Limits,
    *,
    summary_cap: int,
    reply_tokens: int,
    ask_questions: bool = False,
    written: list[WrittenSummary] | None = None,
    summarizer: list[ServerSummarizer] | None = None,
) -> list[Checkpoint]:
    """Plays ``script`` through peer ``key`` (knob ``knob``) on ``backend``; returns the checkpoints as ``real.play``.

    ``written`` receives the summaries the model wrote; ``summarizer``, when given, receives the peer's summarizer
    (what it sent). A turn the server refused (its context window) is counted as refused; the library keeps whatever
    state it had reached, as an app that caught the error would.
    """
    probing = ProbingBackend(
        backend,
        script,
        ask_at=frozenset(checkpoints) if ask_questions else frozenset(),
        model=model,
        reply_tokens=reply_tokens,
        summary_cap=summary_cap,
        budget=limits.max_input_tokens,
    )
    if written is not None:
        probing.written = written
    writer = ServerSummarizer(probing, model, summary_cap)
    if summarizer is not None:
        summarizer.append(writer)
    peer = PEERS[key][1](probing, limits, knob, writer)  # type: ignore[arg-type]
    return play_script(probing, checkpoints, peer.play_turn, BackendError)


def peer_plays(
    backend: Backend, args: argparse.Namespace, script: Script, checkpoints: Sequence[int]
) -> dict[str, Callable[[list[WrittenSummary]], list[Checkpoint]]]:
    """Row label -> a play of each peer ``args.peers`` names, its knob from ``args.knob`` or ``TUNED_AT_1000``."""
    knobs = {**TUNED_AT_1000, **dict(args.knob)}
    limits = Limits(args.budget, args.recent_turns)
    plays = {}
    for key in chosen(args.peers):
        cls, knob = PEERS[key][1], knobs.get(key)
        label = f"{cls.label} ({cls.knob_name}={knob:,})" if cls.tunable and knob is not None else cls.label
        plays[label] = lambda texts, key=key, knob=knob: play_peer(
            backend,
            args.model,
            script,
            checkpoints,
            key,
            knob,
            limits,
            summary_cap=args.summary_tokens,
            reply_tokens=args.reply_tokens,
            ask_questions=args.ask,
            written=texts,
        )
    return plays
