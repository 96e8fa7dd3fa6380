"""A scripted fake backend that records every request it is sent. Tests only."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memora.memory.backend import OPENAI_PROFILE, BackendError, Completion, ReplyRequest, ServerProfile, SummaryRequest
from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter, count_text
from memora.text.usage import Usage

Fault = Callable[[], BaseException]


@dataclass
class ScriptedBackend:
    """Answers replies with ``reply_prefix + n`` and summaries by joining what it was given.

    Usage is real o200k_base counts, times ``input_scale`` for the input (a server
    whose tokenizer counts more), or ``reported_input`` when set (a server that
    reports what it likes). ``reply_text`` replaces the numbered replies;
    ``cut_replies`` and ``cut_summaries`` make the server report that it stopped
    at the output cap. ``count_remotely``: the server counts each request before it is sent
    (``count_request``, as OpenAI's count endpoint with ``MEMORA_TOKEN_COUNTING=api``), with o200k_base,
    each count recorded in ``counts``. ``fail_next`` queues faults by step name
    (``"reply"``, ``"reply_midstream"``, ``"summary"``, ``"count"``); each is
    raised once, at that step, and recorded like any other call.
    """

    label: str = "Scripted fake"
    offline: bool = False
    profile: ServerProfile = OPENAI_PROFILE
    summary_text: Callable[[SummaryRequest], str] | None = None
    reply_text: Callable[[ReplyRequest], str] | None = None
    cut_replies: bool = False
    cut_summaries: bool = False
    input_scale: float = 1.0
    reported_input: int | None = None
    count_remotely: bool = False
    replies: list[ReplyRequest] = field(default_factory=list)
    summaries: list[SummaryRequest] = field(default_factory=list)
    counts: list[tuple[str, tuple]] = field(default_factory=list)
    faults: dict[str, list[Fault]] = field(default_factory=dict)
    billed: list[tuple[str, int]] = field(default_factory=list)
    """``(kind, total_tokens)`` of each request that completed and reported usage, in order."""

    def fail_next(self, step: str, fault: Fault = lambda: BackendError("scripted failure")) -> None:
        self.faults.setdefault(step, []).append(fault)

    def _maybe_fail(self, step: str) -> None:
        queued = self.faults.get(step)
        if queued:
            raise queued.pop(0)()

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        self.replies.append(request)
        self._maybe_fail("reply")
        text = self.reply_text(request) if self.reply_text else f"reply {len(self.replies)}"
        head, tail = (text[: len("reply ")], text[len("reply ") :]) if len(text) > len("reply ") else (text, "")
        yield head
        self._maybe_fail("reply_midstream")
        if tail:
            yield tail
        usage = Usage(self._input(LocalTokenCounter().count(request.model, request.instructions, request.messages)), count_text(text))
        self.billed.append(("reply", usage.total_tokens))
        yield Completion(text, usage, cut=self.cut_replies)

    def summarize(self, request: SummaryRequest) -> Completion:
        self.summaries.append(request)
        self._maybe_fail("summary")
        if self.summary_text is not None:
            text = self.summary_text(request)
        else:
            text = " | ".join(filter(None, [request.existing_summary, *(m.content for m in request.new_messages)]))
        counted = LocalTokenCounter().count(request.model, request.instructions, [Message("user", request.input_text)])
        usage = Usage(self._input(counted), count_text(text))
        self.billed.append(("summary", usage.total_tokens))
        return Completion(text, usage, cut=self.cut_summaries)

    def _input(self, counted: int) -> int:
        return self.reported_input if self.reported_input is not None else math.ceil(counted * self.input_scale)

    def count_request(self, model: str, instructions: str, messages: Any) -> int | None:
        """None without ``count_remotely``: no count endpoint; local counts are this server's own."""
        if not self.count_remotely:
            return None
        self.counts.append((instructions, tuple(messages)))
        self._maybe_fail("count")
        return LocalTokenCounter().count(model, instructions, messages)

    def counting_source(self, model: str) -> str | None:
        return "the scripted server's count" if self.count_remotely else None


GATE_WAIT_S = 30.0
"""How long a gated reply waits for its test to release it: a bound on a hang, not a measure of speed."""


@dataclass
class GatedBackend(ScriptedBackend):
    """A ``ScriptedBackend`` whose replies stop after their first piece until the test calls ``release()``.

    ``streaming`` is set once a reply's first piece has been taken by its reader
    (so the page can show it); ``closed`` records each reply stream closed
    before its Completion (a Stop or a Reset), by its index in ``replies``. A reply
    still gated after ``GATE_WAIT_S`` goes on, so a broken test cannot hang.
    """

    gate: threading.Event = field(default_factory=threading.Event)
    streaming: threading.Event = field(default_factory=threading.Event)
    closed: list[int] = field(default_factory=list)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        inner = super().stream_reply(request)
        first = next(inner)  # records the request; a scripted "reply" fault raises here
        index = len(self.replies) - 1
        completed = False
        try:
            yield first
            self.streaming.set()
            self.gate.wait(GATE_WAIT_S)
            for item in inner:
                completed = isinstance(item, Completion)
                yield item
        except GeneratorExit:
            if not completed:  # a reader leaves a finished stream after its Completion; that is no close
                self.closed.append(index)
            raise

    def release(self) -> None:
        """Lets held replies, and every later one, run to their end."""
        self.gate.set()

    def hold(self) -> None:
        """Holds the next replies after their first piece again; ``streaming`` waits for the next one."""
        self.gate.clear()
        self.streaming.clear()
