"""What a real-model run sees: each reply request probed for the planted facts, each request priced.

``ProbingBackend`` wraps a real backend for ``real.py``'s rows (Memora, the references) and ``real_peers.py``'s
(the peer libraries); ``checkpoint`` reads its records at a checkpoint turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.memory.questions import Answered, ask
from benchmarks.memory.recording import Call
from benchmarks.memory.retention import Recall, due_facts, has_current_message, probe
from benchmarks.memory.run import list_price, usd_per_100_turns
from benchmarks.memory.script import Script
from memora.memory import DEFAULT_MODEL
from memora.memory.backend import Backend, Completion, ReplyRequest, ServerProfile, SummaryRequest
from memora.text.messages import Message
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


def play_script(
    probing: ProbingBackend, checkpoints: Sequence[int], play_turn: Callable[[str], object], refusal: type[Exception]
) -> list[Checkpoint]:
    """Plays ``probing.script``'s user messages, one ``play_turn(text)`` a turn, and returns the ``checkpoint`` at each
    turn of ``checkpoints``. A turn that raises ``refusal`` is counted as refused and the play goes on; the memory
    keeps whatever state it had reached, as an app that caught the error would."""
    out = []
    refused = 0
    for number, text in enumerate(probing.script.user_messages, start=1):
        probing.turn = number
        try:
            play_turn(text)
        except refusal:
            refused += 1
        if number in checkpoints:
            out.append(checkpoint(probing, number, refused))
    return out


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
