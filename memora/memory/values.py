"""The memory's values: its limits, errors, summary versions, prepared contexts and turn stats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from memora.memory.backend import BackendError
from memora.memory.hook import Caps
from memora.text.messages import Message
from memora.text.usage import RequestParts, UsageRecord

DEFAULT_MODEL = "gpt-5-mini"
MAX_INPUT_TOKENS = 1000
MAX_RECENT_TURNS = 3
MAX_SUMMARY_TOKENS = 200
"""About 150 English words, the cap SUMMARY_INSTRUCTIONS asks for."""

MAX_REPLY_TOKENS = 1000
"""The output cap of one reply: far above a tutor's answer, far below a runaway's."""

MIN_MESSAGE_ROOM = 32
"""Tokens a budget must leave for the current message, beyond instructions and summary."""

MIN_FOLD_ROOM = 64
"""Tokens a summary request must leave for the messages it folds (a pair, cut if need be)."""

FoldPolicy = str
"""A registered fold policy's name (``memora.memory.policies``): ``window``, the article's rule, a
fixed recent window; ``watermark``, fold every pair older than the window once a request passes its
high-water mark."""


@dataclass(frozen=True)
class Limits:
    """What a memory may send and write, changed only through ``ShortTermMemory.configure`` (which
    validates them).

    ``max_input_tokens`` is the input budget and ``max_recent_turns`` the recent window (the
    article's two); ``fold_policy`` a registered policy's name; ``max_summary_tokens`` each
    summary's cap and ``max_reply_tokens`` each reply's (None: none); ``context_window`` the
    server's, when known; ``caps`` the classroom's caps on the session (None: none, as in the
    article), which the app installs.
    """

    max_input_tokens: int
    max_recent_turns: int
    fold_policy: FoldPolicy
    max_summary_tokens: int
    max_reply_tokens: int | None
    context_window: int | None
    caps: Caps | None = None

    @property
    def output(self) -> int:
        """The most one request may write: a reply or a summary."""
        return max(self.max_reply_tokens or 0, self.max_summary_tokens)


Source = Literal["instructions", "instructions_summary", "summary", "window", "current"]
"""Where a context message came from. ``instructions_summary`` is the one system
message that carries both, for servers that keep only one (``ServerProfile``)."""


class ContextBudgetError(ValueError):
    """Even the summary plus the current message exceed ``max_input_tokens``.

    Carries both figures: ``input_tokens`` (what the smallest possible context
    needs) and ``max_input_tokens`` (the budget).
    """

    def __init__(self, input_tokens: int, max_input_tokens: int) -> None:
        self.input_tokens = input_tokens
        self.max_input_tokens = max_input_tokens
        super().__init__(
            f"The current message needs {input_tokens} input tokens with the instructions and "
            f"summary, but max_input_tokens is {max_input_tokens}. Shorten the message or raise "
            "the budget."
        )


class SummaryError(BackendError):
    """The summary request returned nothing usable; the old summary is kept."""


FoldReason = Literal["none", "window", "budget", "high_water"]
"""Why the last message of a fold had to go: it left the recent window (``window``), the request did
not fit the budget (``budget``), the watermark's request would have passed its high-water mark
(``high_water``); ``none`` when nothing had to, or when it is not known."""


@dataclass(frozen=True)
class SummaryVersion:
    """One state of the running summary.

    ``summarized_message_count`` is the history pointer after this version:
    messages ``history[:summarized_message_count]`` are folded into ``text``.
    ``folded`` is the half-open index range this version added (empty when the
    summary was rewritten without moving the pointer). ``tokens`` is what the
    summary request cost; ``turn`` is the user turn that triggered it.
    ``cut`` is True when the model's summary ran past its cap and was trimmed to
    its last whole sentence; ``clipped`` counts the folded messages whose middle
    was cut (with a marker) so the summary request fit the budget. ``reason`` is why the plan that
    made it folded (``FoldReason``): ``none`` for a rewrite that moved no message, and for a version
    saved before versions kept their reason.
    """

    text: str
    summarized_message_count: int
    folded: tuple[int, int]
    tokens: int
    turn: int
    cut: bool = False
    clipped: int = 0
    reason: FoldReason = "none"


@dataclass(frozen=True)
class PreparedContext:
    """What one reply request sends, with where each message came from.

    ``sources[i]`` and ``message_tokens[i]`` describe ``context_messages[i]``.
    ``instructions`` is what goes as the request's instructions: empty when they
    travel in the context's system message instead. ``input_tokens`` covers
    instructions plus all messages, framing included. ``server_input_tokens`` is the
    server tokenizer's own count of the request, template included, when it has one.
    ``parts`` is the same request part by part, the record the ledger keeps (None for a request
    restored from a conversation saved before requests kept their parts).
    """

    instructions: str
    context_messages: tuple[Message, ...]
    sources: tuple[Source, ...]
    message_tokens: tuple[int, ...]
    input_tokens: int
    summary_token_usage: int
    newly_summarized_count: int
    server_input_tokens: int | None = None
    parts: RequestParts | None = None

    @property
    def texts(self) -> list[str]:
        """The texts the request carries: its instructions and each message's content (for the
        calibration's kinds)."""
        return [self.instructions, *(m.content for m in self.context_messages)]

    def as_dict(self) -> dict[str, Any]:
        """The article's ``memory_stats`` dict."""
        return {
            "context_messages": list(self.context_messages),
            "input_tokens": self.input_tokens,
            "summary_token_usage": self.summary_token_usage,
            "newly_summarized_count": self.newly_summarized_count,
        }


@dataclass(frozen=True)
class TurnStats:
    """The article's per-turn stats block for one finished turn: its reply's ledger ``record``
    (every figure the server and the local count gave: input, output, cut, over budget, whose figure
    it is), and the session's total tokens once that record was counted. Nothing is copied; the
    three properties are the article's names for the record's turn figures, 0 where the record has
    none.
    """

    record: UsageRecord
    session_total_tokens: int

    @property
    def newly_summarized_count(self) -> int:
        return self.record.newly_summarized or 0

    @property
    def context_messages(self) -> int:
        return self.record.context_messages or 0

    @property
    def summary_token_usage(self) -> int:
        return self.record.summary_tokens or 0
