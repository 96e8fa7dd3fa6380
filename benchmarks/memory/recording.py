"""The benchmark's model: answers from the script at once and records every request.

It is a benchmark instrument, not a language model and not a test fake: it
replies with the script's next reply, summarizes extractively (the offline
engine's summarizer), and reports usage from real o200k_base counts of what it
was actually sent. Every figure in the benchmark is computed from its records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from benchmarks.memory.retention import Probed, Recall, due_facts, has_current_message, probe
from benchmarks.memory.script import Script
from memora.backends.offline import merge_summary
from memora.memory.backend import OPENAI_PROFILE, Completion, ReplyRequest, ServerProfile, SummaryRequest
from memora.text.messages import Message
from memora.text.prompts import WORDS_PER_TOKEN, summary_word_limit
from memora.text.tokens import LocalTokenCounter, count_text, truncate_text
from memora.text.usage import Usage

CallKind = Literal["reply", "summary", "count"]

CutRule = Literal["beginning", "newest"]
"""How an over-cap summary is cut: ``beginning`` keeps its start, as Memora's summarizer (``truncate_text``) and a
model stopped by ``max_output_tokens`` do; ``newest`` drops its oldest lines first (the bench's former rule, kept as
a sensitivity row)."""

CUT_RULES: tuple[CutRule, ...] = ("beginning", "newest")
DEFAULT_CUT: CutRule = "beginning"

SUMMARY_TOKEN_CAP = 200
"""The default summary cap: a model asked for "under 150 words" returns about this many tokens at most.

Every strategy and peer on one backend gets the same cap (``RecordingBackend.summary_cap``; the
article sets no output cap of its own), so that summary sizes never decide the comparison; the
bench sweeps it (``run.CAPS``)."""


@dataclass(frozen=True)
class Call:
    """One request the backend received.

    ``input_tokens`` is the o200k count of what was sent, framing included.
    Count calls bill no tokens, but each is a round trip, so it is a model call.
    ``after_reply`` marks requests made after the turn's reply (prefolding):
    they are off the critical path of that turn and of the next.
    ``recent_pairs`` (reply requests only) is how many of the conversation's
    previous (user, reply) pairs the request sent verbatim, whole and in order,
    right before the current message; ``None`` for other kinds.
    """

    turn: int
    kind: CallKind
    input_tokens: int
    output_tokens: int
    after_reply: bool = False
    recent_pairs: int | None = None
    recall: Recall | None = None
    """Reply requests of a script with planted facts: the retention probe's outcome (``retention.probe``)."""
    has_current: bool = True
    """Reply requests only: whether the user's current message was in it (``retention.has_current_message``)."""


@dataclass
class RecordingBackend:
    """Instant (or fixed-delay) backend that records what it was sent.

    ``replies`` are returned in order, one per reply request (cycling if the
    replay needs more). ``delay_s`` is slept before the first reply delta, before
    a summary returns and before a count returns: a stand-in for network and
    time-to-first-token. ``busy_s`` accumulates the time spent inside the
    backend, so that callers can subtract it from a turn's wall time.
    ``turn`` and ``after_reply`` are set by the driver and stamped on each record.
    ``said`` is the conversation as the backend saw it: each reply request's
    current message with the reply it was given. With a ``script``, each reply
    request of turn ``turn`` is probed for the planted facts due at that turn
    and for the user's current message (``retention.py``). Every summary is at
    most ``summary_cap`` tokens (and the request's own ``max_output_tokens``), cut by ``cut``.
    """

    replies: Sequence[str]
    script: Script | None = None
    summary_cap: int = SUMMARY_TOKEN_CAP
    cut: CutRule = DEFAULT_CUT
    delay_s: float = 0.0
    label: str = "Benchmark recorder (not a model)"
    offline: bool = True
    profile: ServerProfile = OPENAI_PROFILE
    turn: int = 0
    after_reply: bool = False
    calls: list[Call] = field(default_factory=list)
    said: list[tuple[Message, Message]] = field(default_factory=list)
    busy_s: float = 0.0
    count_remotely: bool = False
    _next_reply: int = 0
    _counter: LocalTokenCounter = field(default_factory=LocalTokenCounter)
    _due: list[tuple[Probed, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.script is not None:
            self._due = due_facts(self.script)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        began = time.perf_counter()
        text = self.replies[self._next_reply % len(self.replies)]
        self._next_reply += 1
        usage = Usage(self._counter.count(request.model, request.instructions, request.messages), count_text(text))
        pairs = recent_pairs(request.messages, self.said)
        recall, current = None, True
        if self.script is not None and 0 < self.turn <= self.script.turns:
            said = self.script.user_messages[self.turn - 1]
            recall = probe(request.messages, self._due[self.turn - 1], said)
            current = has_current_message(request.messages, said)
        call = Call(self.turn, "reply", usage.input_tokens, usage.output_tokens, recent_pairs=pairs, recall=recall, has_current=current)
        self.calls.append(call)
        self.said.append((request.messages[-1], Message("assistant", text)))
        head, _, tail = text.partition(" ")
        deltas = [head, " " + tail] if tail else [head]
        completion = Completion(text, usage)
        self._wait()
        self.busy_s += time.perf_counter() - began
        # Everything the backend makes is made above, in the timed part; the deltas are yielded outside it:
        # the consumer's time between them is not the backend's.
        yield from deltas
        yield completion

    def summarize(self, request: SummaryRequest) -> Completion:
        began = time.perf_counter()
        cap = min(request.max_output_tokens, self.summary_cap)
        text = merge_summary(request.existing_summary, request.new_messages, summary_words(cap, request.instructions))
        text = cut_summary(text, cap, self.cut)
        counted = self._counter.count(request.model, request.instructions, [Message("user", request.input_text)])
        usage = Usage(counted, count_text(text))
        self.calls.append(Call(self.turn, "summary", usage.input_tokens, usage.output_tokens, self.after_reply))
        self._wait()
        self.busy_s += time.perf_counter() - began
        return Completion(text, usage)

    def counting_source(self, model: str) -> str | None:
        return "the recorder's count endpoint" if self.count_remotely else None

    def count_request(self, model: str, instructions: str, messages: Sequence[Message]) -> int | None:
        """Where ``count_remotely`` (the article's API count), a recorded call of kind "count" that waits like any other;
        None otherwise: no count endpoint, local counts are this server's own."""
        if not self.count_remotely:
            return None
        began = time.perf_counter()
        counted = self._counter.count(model, instructions, messages)
        self.calls.append(Call(self.turn, "count", counted, 0))
        self._wait()
        self.busy_s += time.perf_counter() - began
        return counted

    def _wait(self) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)


def summary_words(cap: int, instructions: str = "") -> int:
    """The words the extractive summary may keep: what ``instructions`` ask ("under N words"), and what ``cap`` tokens hold.

    A model told its output cap writes to it; so does the recorder, for every strategy and peer alike.
    """
    return min(summary_word_limit(instructions), int(cap * WORDS_PER_TOKEN))


def cut_summary(text: str, cap: int, rule: CutRule = DEFAULT_CUT) -> str:
    """``text`` within ``cap`` tokens by ``rule`` (``CutRule``); unchanged when it fits, ``""`` when ``cap <= 0``."""
    if rule == "newest":
        return keep_newest_lines(text, cap)
    return truncate_text(text, cap)


def keep_newest_lines(text: str, cap: int) -> str:
    """``text`` within ``cap`` tokens, its OLDEST lines dropped first (a summary's newest lines hold the latest values).

    A single line over the cap keeps its beginning; ``""`` when ``cap <= 0``.
    """
    lines = text.splitlines()
    while len(lines) > 1 and count_text("\n".join(lines)) > cap:
        lines.pop(0)
    return truncate_text("\n".join(lines), cap)


def recent_pairs(messages: Sequence[Message], said: Sequence[tuple[Message, Message]]) -> int:
    """How many of ``said``'s last pairs end ``messages``, verbatim and in order, before its last (current) message.

    A pair counts only whole: a cut, merged or summarized message ends the run.
    A memory that sends no history gets 0.
    """
    kept = 0
    end = len(messages) - 1
    for user, reply in reversed(said):
        if end < 2 or not (_same(messages[end - 2], user) and _same(messages[end - 1], reply)):
            break
        kept, end = kept + 1, end - 2
    return kept


def _same(a: Message, b: Message) -> bool:
    # Message == Message goes through Mapping.__eq__, which builds two dicts.
    return a.content == b.content and a.role == b.role
