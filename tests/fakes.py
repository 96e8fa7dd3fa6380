"""A scripted fake backend that records every request it is sent. Tests only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from memora.backends.base import OPENAI_PROFILE, BackendError, Completion, ReplyRequest, ServerProfile, SummaryRequest
from memora.tokens import LocalTokenCounter, count_text
from memora.usage import Usage

Fault = Callable[[], BaseException]


@dataclass
class ScriptedBackend:
    """Answers replies with ``reply_prefix + n`` and summaries by joining what it was given.

    Usage is real o200k_base counts. ``fail_next`` queues faults by step name
    (``"reply"``, ``"reply_midstream"``, ``"summary"``, ``"count"``); each is
    raised once, at that step, and recorded like any other call.
    """

    label: str = "Scripted fake"
    offline: bool = False
    profile: ServerProfile = OPENAI_PROFILE
    summary_text: Callable[[SummaryRequest], str] | None = None
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
        text = f"reply {len(self.replies)}"
        yield "reply "
        self._maybe_fail("reply_midstream")
        yield str(len(self.replies))
        input_tokens = LocalTokenCounter().count(request.model, request.instructions, request.messages)
        usage = Usage(input_tokens, count_text(text))
        self.billed.append(("reply", usage.total_tokens))
        yield Completion(text, usage)

    def summarize(self, request: SummaryRequest) -> Completion:
        self.summaries.append(request)
        self._maybe_fail("summary")
        if self.summary_text is not None:
            text = self.summary_text(request)
        else:
            text = " | ".join(filter(None, [request.existing_summary, *(m.content for m in request.new_messages)]))
        usage = Usage(count_text(request.input_text), count_text(text))
        self.billed.append(("summary", usage.total_tokens))
        return Completion(text, usage)

    def count_input_tokens(self, model, instructions, messages) -> int:
        self.counts.append((instructions, tuple(messages)))
        self._maybe_fail("count")
        return LocalTokenCounter().count(model, instructions, messages)
