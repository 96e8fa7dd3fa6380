"""The usage ledger: one frozen record per model request. Its pandas frames are ``memora.ui.frames``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from memora.calibration import implausible

RequestKind = Literal["reply", "summary"]


@dataclass(frozen=True)
class Usage:
    """Tokens one model request used, as the server reported them.

    ``estimated`` is True when the server reported nothing and the figures were
    counted locally instead.
    """

    input_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class UsageRecord:
    """One model request in the ledger.

    ``counted_input_tokens`` is the local (or API) count taken before sending;
    ``input_tokens`` is what the server billed. ``full_history_tokens`` is what
    sending the whole history would have cost; it is set for replies only.
    ``turn`` is the 1-based number of the user turn the request served.
    ``input_tokens`` and ``output_tokens`` are None when the caller reported only
    a total (the article's ``finish_turn(..., response_tokens)``).
    ``cut`` is True when the server stopped the output at its cap. ``implausible``
    is True when the server reported fewer input tokens than the request's text
    can cost (``memora.calibration.implausible``): that figure is no bill.
    ``input_budget`` is the budget the request was planned for. For a reply,
    ``context_messages``, ``newly_summarized`` and ``summary_tokens`` are the
    turn's figures: messages sent, messages folded and summary tokens spent
    while preparing it; ``TurnStats`` is derived from them, not stored apart.
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

    @property
    def billed(self) -> bool:
        """Whether ``input_tokens`` is the server's own, believable count."""
        return self.input_tokens is not None and not self.estimated and not self.implausible

    @property
    def over_budget(self) -> bool:
        """Whether the server counted more input than the budget the request was planned for."""
        return self.billed and self.input_budget is not None and self.input_tokens > self.input_budget  # type: ignore[operator]

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
            implausible=not usage.estimated and implausible(counted_input_tokens, usage.input_tokens),
            input_budget=input_budget,
            context_messages=context_messages,
            newly_summarized=newly_summarized,
            summary_tokens=summary_tokens,
        )


class Ledger(list[UsageRecord]):
    """Every model request of one conversation, in order; append-only.

    ``total`` is the sum of every record's ``total_tokens``, added up as records
    are appended, since it is read on every turn of a conversation that grows
    without bound.
    """

    def __init__(self, records: Iterable[UsageRecord] = ()) -> None:
        super().__init__(records)
        self.total = sum(record.total_tokens for record in self)

    def append(self, record: UsageRecord) -> None:
        super().append(record)
        self.total += record.total_tokens

    def __reduce__(self) -> tuple[type[Ledger], tuple[list[UsageRecord]]]:
        # Copies and pickles rebuild from the records, so the total is summed once, not appended onto.
        return type(self), (list(self),)
