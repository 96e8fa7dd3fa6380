"""The usage ledger: one frozen record per model request. Its pandas frames are
``memora.app.page.frames``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from memora.text.calibration import implausible

RequestKind = Literal["reply", "summary"]


@dataclass(frozen=True)
class SentMessage:
    """One history message a request carried: its ``number`` as the chat shows it (#1 is the first
    message) and its ``tokens`` by the count the request was checked with."""

    number: int
    tokens: int


@dataclass(frozen=True)
class RequestParts:
    """What one request carried, part by part, made once by the memory when it checks the request:
    every view of that request (the bars, the turn boxes, the context cards, the ledger, the
    terminal) reads it, none rebuilds it.

    Counts only, never texts. Every part is in the count the plan checked the request with (local
    o200k_base), so the parts add up to the record's ``counted_input_tokens`` (``tokens``):

    - a reply request: ``instructions`` (the system prompt, the chat framing and the reply's
      priming), ``summary`` (what the summary adds: its own message, or its share of the one system
      message; 0 for none), ``window`` (each recent message sent verbatim, oldest first) and
      ``current`` (the user's message);
    - a summary request: ``instructions`` (the summary instructions, the layout and the priming),
      ``summary`` (the old summary's text it merges; 0 for none), ``window`` (the messages it
      folds) and ``current`` None.

    ``budget`` is the budget the request was checked against, in the same count (the local budget:
    the budget in force, through the calibration where the server counts otherwise;
    ``UsageRecord.input_budget`` is the same budget in the server's own tokens). ``version`` is the
    summary version the request carried (a reply; 0 for none) or made (a summary request), and
    ``reason`` why that version's fold happened (a ``FoldReason``: ``window``, ``budget``,
    ``high_water``; ``none`` when nothing was folded, or for a rewrite).
    """

    instructions: int
    summary: int
    window: tuple[SentMessage, ...]
    current: SentMessage | None
    budget: int
    version: int = 0
    reason: str = "none"

    @property
    def window_tokens(self) -> int:
        return sum(message.tokens for message in self.window)

    @property
    def current_tokens(self) -> int:
        return 0 if self.current is None else self.current.tokens

    @property
    def tokens(self) -> int:
        """The request's local tokens: the left side of the budget inequality the plan
        checked."""
        return self.instructions + self.summary + self.window_tokens + self.current_tokens

    @property
    def numbers(self) -> tuple[int, ...]:
        """The chat numbers of the history messages it carried, oldest first."""
        sent = (*self.window, *(() if self.current is None else (self.current,)))
        return tuple(message.number for message in sent)

    @classmethod
    def of(cls, data: dict[str, Any]) -> RequestParts:
        """Parts from their saved form (``dataclasses.asdict``), the caller having validated it."""
        window = tuple(SentMessage(**message) for message in data["window"])
        current = None if data["current"] is None else SentMessage(**data["current"])
        return cls(**{**data, "window": window, "current": current})


@dataclass(frozen=True)
class Usage:
    """Tokens one model request used, and whose figures they are.

    ``estimated`` is True when nobody counted the request: the server reported
    nothing and Memora counted locally (``by`` None), or ``by`` names who estimated
    (LiteLLM's streamed usage is its own estimate). ``bills`` is True only when ``by``
    is a provider that bills by these figures (OpenAI). ``teaches`` is False for a
    figure that may be an estimate though nothing marks it as one (a proxy's streamed
    usage): the calibration never learns from it.
    """

    input_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False
    by: str | None = None
    bills: bool = False
    teaches: bool = True

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def label(self) -> str:
        """Whose figure this is, in words: "billed by OpenAI", "reported by the server", "estimated
        locally (o200k_base)"."""
        return usage_label(self.estimated, self.bills, self.by)


def usage_label(estimated: bool, bills: bool, by: str | None) -> str:
    """``Usage.label``: "billed" only for a provider that bills by the figure."""
    if estimated:
        return f"estimated by {by}" if by else "estimated locally (o200k_base)"
    return f"{'billed' if bills else 'reported'} by {by or 'the server'}"


DISAGREEMENT_TOKENS = 3
"""A reported input count further than this (or 2%) from the server tokenizer's own count disagrees
with it."""


@dataclass(frozen=True)
class UsageRecord:
    """One model request in the ledger.

    ``counted_input_tokens`` is the local (or API) count taken before sending; ``input_tokens`` is
    what the server billed. ``full_history_tokens`` is what sending the whole history would have
    cost; it is set for replies only. ``turn`` is the 1-based number of the user turn the request
    served. ``input_tokens`` and ``output_tokens`` are None when the caller reported only a total
    (the article's ``finish_turn(..., response_tokens)``). ``cut`` is True when the server stopped
    the output at its cap. ``implausible`` is True when the server reported fewer input tokens than
    the request's text can cost (``memora.text.calibration.implausible``): that figure is no bill.
    ``input_budget`` is the budget in force when the request was checked, in the server's tokens (a
    later change of setting does not move it). ``parts`` is what the request carried, part by part
    (``RequestParts``: None for a record saved before records kept them).
    ``server_counted_input_tokens`` is
    the server tokenizer's own count of the request, taken before sending (None where the server has
    no tokenizer endpoint); ``source`` says whose figure ``input_tokens`` is (``Usage.label``), and
    ``teaches`` whether the calibration may learn from it. For a reply, ``context_messages``,
    ``newly_summarized`` and ``summary_tokens`` are the turn's figures: messages sent, messages
    folded and summary tokens spent while preparing it; ``TurnStats`` is derived from them, not
    stored apart.
    """

    turn: int
    kind: RequestKind
    model: str
    counted_input_tokens: int
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int
    latency_s: float
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False
    full_history_tokens: int | None = None
    cut: bool = False
    implausible: bool = False
    input_budget: int | None = None
    context_messages: int | None = None
    newly_summarized: int | None = None
    summary_tokens: int | None = None
    server_counted_input_tokens: int | None = None
    source: str = ""
    bills: bool = False
    teaches: bool = True
    parts: RequestParts | None = None

    @property
    def disagrees(self) -> bool:
        """Whether the reported input differs from the server tokenizer's own count of the same
        request."""
        exact = self.server_counted_input_tokens
        reported = self.input_tokens
        if exact is None or reported is None or self.estimated:
            return False
        return abs(reported - exact) > max(DISAGREEMENT_TOKENS, exact * 0.02)

    @property
    def trusted(self) -> bool:
        """Whether ``input_tokens`` is a server's own, believable count: not estimated, not
        implausibly low, not contradicted by the server tokenizer's count."""
        return (
            self.input_tokens is not None
            and not self.estimated
            and not self.implausible
            and not self.disagrees
        )

    @property
    def billed(self) -> bool:
        """Whether ``input_tokens`` is a bill: a trusted figure from a provider that bills by it."""
        return self.bills and self.trusted

    @property
    def server_input_tokens(self) -> int | None:
        """The server's own count of the input: its tokenizer's, else a trusted reported figure;
        else None."""
        if self.server_counted_input_tokens is not None:
            return self.server_counted_input_tokens
        return self.input_tokens if self.trusted else None

    @property
    def over_budget(self) -> bool:
        """Whether the server counted more input than the budget the request was planned for."""
        counted = self.server_input_tokens
        return counted is not None and self.input_budget is not None and counted > self.input_budget

    @property
    def input_label(self) -> str:
        """Whose figure ``input_tokens`` is, and whether it disagrees with the server tokenizer's
        count."""
        label = self.source or usage_label(self.estimated, self.bills, None)
        if self.disagrees:
            label += f", disagreeing with the server tokenizer's {self.server_counted_input_tokens}"
        return label

    @classmethod
    def of(
        cls,
        *,
        turn: int,
        kind: RequestKind,
        model: str,
        counted_input_tokens: int,
        usage: Usage,
        latency_s: float,
        full_history_tokens: int | None = None,
        cut: bool = False,
        input_budget: int | None = None,
        context_messages: int | None = None,
        newly_summarized: int | None = None,
        summary_tokens: int | None = None,
        server_counted_input_tokens: int | None = None,
        parts: RequestParts | None = None,
    ) -> UsageRecord:
        """A record of a request whose server reported ``usage``; implausible input is flagged."""

        return cls(
            turn=turn,
            kind=kind,
            model=model,
            counted_input_tokens=counted_input_tokens,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            latency_s=latency_s,
            reasoning_tokens=usage.reasoning_tokens,
            cached_tokens=usage.cached_tokens,
            estimated=usage.estimated,
            full_history_tokens=full_history_tokens,
            cut=cut,
            implausible=not usage.estimated
            and implausible(counted_input_tokens, usage.input_tokens),
            input_budget=input_budget,
            context_messages=context_messages,
            newly_summarized=newly_summarized,
            summary_tokens=summary_tokens,
            server_counted_input_tokens=server_counted_input_tokens,
            source=usage.label,
            bills=usage.bills,
            teaches=usage.teaches,
            parts=parts,
        )


class Ledger(Sequence[UsageRecord]):
    """Every model request of one conversation, in order; append-only.

    ``total`` is the sum of every record's ``total_tokens``, added up as records are appended,
    since it is read on every turn of a conversation that grows without bound. ``append`` is the
    only way in: a ledger is no list, so no ``extend``, ``insert`` or ``+=`` can leave the total
    behind. It reads as a sequence (a slice is a list), and equals any list or ledger of the same
    records.
    """

    def __init__(self, records: Iterable[UsageRecord] = ()) -> None:
        self._records = list(records)
        self.total = sum(record.total_tokens for record in self._records)

    def append(self, record: UsageRecord) -> None:
        self._records.append(record)
        self.total += record.total_tokens

    @overload
    def __getitem__(self, index: int) -> UsageRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[UsageRecord]: ...

    def __getitem__(self, index: int | slice) -> UsageRecord | list[UsageRecord]:
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Ledger):
            return self._records == other._records
        return isinstance(other, list | tuple) and self._records == list(other)

    __hash__ = None  # type: ignore[assignment]  # it changes as it grows

    def __repr__(self) -> str:
        return f"Ledger({self._records!r})"

    def __reduce__(self) -> tuple[type[Ledger], tuple[list[UsageRecord]]]:
        # Copies and pickles rebuild from the records, so the total is summed once, not appended
        # onto.
        return type(self), (list(self._records),)
