"""ShortTermMemory: the conversation's state, and what each request is sent.

The article's Memora v0.7 API is kept name for name, so its main loop runs
against this class unchanged. On top of it:

- budget planning from local o200k_base counts, so that several pairs leaving
  the window or the budget are folded in one summary request;
- a bounded summary (``max_summary_tokens``), so summary plus message can fit;
- bounded requests: every reply has an output cap (``max_reply_tokens``), and
  every summary request's input fits the budget too, folding in pieces and
  cutting a huge message's middle with a visible marker, so nothing can lock
  a conversation;
- the budget held by the server's own count (``memora.calibration``);
- transactional turns (``memory.turn(text)``) that survive BaseException;
- a usage ledger, one frozen record per model request.

This module imports no model SDK; it talks to a ``Backend``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from memora.backends import Backend, Completion, ReplyRequest, SummaryRequest, as_backend
from memora.backends.base import BackendError
from memora.calibration import Calibration
from memora.limits import SessionLimits
from memora.messages import Message
from memora.prompts import SUMMARY_INSTRUCTIONS, SUMMARY_PREAMBLE, SYSTEM_PROMPT
from memora.tokens import (
    REPLY_PRIMING_TOKENS,
    LocalTokenCounter,
    TokenCounter,
    clip_middle,
    count_message,
    truncate_text,
)
from memora.usage import Usage, UsageRecord

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
            f"The current message needs {input_tokens} input tokens with the instructions and summary, "
            f"but max_input_tokens is {max_input_tokens}. Shorten the message or raise the budget."
        )


class SummaryError(BackendError):
    """The summary request returned nothing usable; the old summary is kept."""


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
    was cut (with a marker) so the summary request fit the budget.
    """

    text: str
    summarized_message_count: int
    folded: tuple[int, int]
    tokens: int
    turn: int
    cut: bool = False
    clipped: int = 0


@dataclass(frozen=True)
class PreparedContext:
    """What one reply request sends, with where each message came from.

    ``sources[i]`` and ``message_tokens[i]`` describe ``context_messages[i]``.
    ``instructions`` is what goes as the request's instructions: empty when they
    travel in the context's system message instead. ``input_tokens`` covers
    instructions plus all messages, framing included.
    """

    instructions: str
    context_messages: tuple[Message, ...]
    sources: tuple[Source, ...]
    message_tokens: tuple[int, ...]
    input_tokens: int
    summary_token_usage: int
    newly_summarized_count: int

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
    """The article's per-turn stats block, for one finished turn.

    ``input_tokens`` and ``output_tokens`` are what the server billed; they are
    None when the caller did not report them (the article's ``finish_turn``).
    ``estimated`` is True when the server reported no usage and it was counted locally.
    ``cut`` is True when the reply stopped at ``max_reply_tokens``. ``over_budget``
    is True when the server counted more input than the budget; ``implausible``
    when what it reported is too low to be the request's cost.
    """

    turn: int
    newly_summarized_count: int
    context_messages: int
    counted_input_tokens: int
    input_tokens: int | None
    output_tokens: int | None
    summary_token_usage: int
    session_total_tokens: int
    estimated: bool = False
    cut: bool = False
    over_budget: bool = False
    implausible: bool = False


class ShortTermMemory:
    """The short-term memory of one conversation.

    ``history`` holds every message in full, as alternating user/assistant
    pairs, possibly followed by one pending user message. Messages
    ``history[:summarized_message_count]`` are folded into ``summary``; the rest
    of the completed pairs form the recent window.

    ``client`` is a memora backend or an ``openai.OpenAI`` client. Token
    counts are local (o200k_base) unless ``token_counter`` says otherwise.
    ``fold_batch_turns`` lets the window grow that many extra turns before
    folding, so that folds come in fewer, larger summary requests; when the
    budget forces a fold before the batch is full, the whole batch folds then.
    ``prefold()`` folds between turns what the next turn will certainly fold.
    ``limits`` caps message size, turns and tokens per session (see ``memora.limits``).
    ``max_reply_tokens`` caps each reply's output (None: no cap). ``context_window``
    is the server's context size in tokens, when known: the budget plus the
    largest output must fit in it.

    Budgets are the server's tokens. Plans are made from local o200k_base counts
    against ``local_budget()``, which ``calibration`` derives from what the
    server reports; on OpenAI the two are the same.
    """

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_MODEL,
        system_prompt: str = SYSTEM_PROMPT,
        summary_instructions: str = SUMMARY_INSTRUCTIONS,
        max_input_tokens: int = MAX_INPUT_TOKENS,
        max_recent_turns: int = MAX_RECENT_TURNS,
        *,
        token_counter: TokenCounter | None = None,
        max_summary_tokens: int = MAX_SUMMARY_TOKENS,
        fold_batch_turns: int = 0,
        limits: SessionLimits | None = None,
        max_reply_tokens: int | None = MAX_REPLY_TOKENS,
        context_window: int | None = None,
    ) -> None:
        self.backend: Backend = as_backend(client)
        self.calibration = Calibration(exact=self.backend.profile.counts_like_o200k)
        self.max_reply_tokens = max_reply_tokens
        self.context_window = context_window
        self.client = client
        self.model = model
        self.system_prompt = system_prompt
        self.summary_instructions = summary_instructions
        self.token_counter: TokenCounter = token_counter or LocalTokenCounter()
        self.max_summary_tokens = max_summary_tokens
        self.max_input_tokens = max_input_tokens
        self.max_recent_turns = max_recent_turns
        self.fold_batch_turns = fold_batch_turns
        self.limits = limits or SessionLimits()
        self.update_limits(max_input_tokens=max_input_tokens, max_recent_turns=max_recent_turns)
        if fold_batch_turns < 0:
            raise ValueError(f"fold_batch_turns must be 0 or more, not {fold_batch_turns}")

        self.history: list[Message] = []
        self.summary_versions: list[SummaryVersion] = []
        self.last_context: list[Message] = []
        self.last_prepared: PreparedContext | None = None
        self.ledger: list[UsageRecord] = []
        self.turn_stats: dict[int, TurnStats] = {}
        """Stats of each finished turn, keyed by the history index of its assistant reply."""
        self._local = LocalTokenCounter()
        # Full-history cost, kept incrementally: (messages counted, their tokens, the last one counted).
        self._history_tokens: tuple[int, int, Message | None] = (0, 0, None)
        self._ledger_total: tuple[list[UsageRecord], int, int] = (self.ledger, 0, 0)  # (ledger, records summed, sum)

    # -- limits -------------------------------------------------------------

    def update_limits(self, *, max_input_tokens: int | None = None, max_recent_turns: int | None = None) -> None:
        """Changes the budget or the window; applied from the next request.

        Raises ValueError, changing nothing, when ``max_recent_turns`` is below 0,
        when the budget cannot hold the instructions plus a full-length summary, or
        when the budget plus the largest output does not fit ``context_window``.
        """
        budget = self.max_input_tokens if max_input_tokens is None else max_input_tokens
        recent = self.max_recent_turns if max_recent_turns is None else max_recent_turns
        if recent < 0:
            raise ValueError(f"max_recent_turns must be 0 or more, not {recent}")
        floor = self.minimum_budget()
        if budget < floor:
            raise ValueError(
                f"max_input_tokens must be at least {floor}: the instructions and a full summary "
                f"({self.max_summary_tokens} tokens) already need that much, before any message."
            )
        output = max(self.max_reply_tokens or 0, self.max_summary_tokens)
        if self.context_window is not None and budget + output > self.context_window:
            raise ValueError(
                f"max_input_tokens ({budget}) plus the largest output ({output}) must fit the server's "
                f"context window of {self.context_window} tokens."
            )
        self.max_input_tokens, self.max_recent_turns = budget, recent

    def minimum_budget(self) -> int:
        """The smallest budget (server tokens) that fits a reply or a summary request.

        A reply needs the instructions, a full-length summary and a short message;
        a summary request needs its instructions, a full-length summary and room
        for the messages it folds.
        """
        reply = self._instructions_tokens() + REPLY_PRIMING_TOKENS + self._reserved_summary_tokens() + MIN_MESSAGE_ROOM
        summary = self._summary_request_overhead() + MIN_FOLD_ROOM
        return self.calibration.server_estimate(max(reply, summary))

    def local_budget(self) -> int:
        """``max_input_tokens`` in local o200k_base tokens, as the calibration makes it hold by the server's count."""
        return self.calibration.local_budget(self.max_input_tokens)

    def switch_backend(self, backend: Backend, model: str, token_counter: TokenCounter | None = None) -> None:
        """Continues this conversation on ``backend`` and ``model``, from the next request.

        The history and summary stay. What was learned about the old server's
        token count does not carry over: the new server starts from its profile.
        """
        self.backend, self.client, self.model = backend, backend, model
        self.token_counter = token_counter or LocalTokenCounter()
        self.calibration = Calibration(exact=backend.profile.counts_like_o200k)

    # -- the article's API ----------------------------------------------------

    @property
    def summary(self) -> str:
        return self.summary_versions[-1].text if self.summary_versions else ""

    @property
    def summarized_message_count(self) -> int:
        return self.summary_versions[-1].summarized_message_count if self.summary_versions else 0

    @property
    def session_total_tokens(self) -> int:
        """Every token of this session's model requests: the ledger's sum.

        Kept incrementally, since it is read every turn and the ledger grows
        without bound: only records appended since the last read are added. The
        ledger is append-only here; if it is replaced or shortened, it is summed afresh.
        """
        ledger, counted, total = self._ledger_total
        if ledger is not self.ledger or counted > len(self.ledger):
            ledger, counted, total = self.ledger, 0, 0
        total += sum(record.total_tokens for record in self.ledger[counted:])
        self._ledger_total = (ledger, len(self.ledger), total)
        return total

    def add_user_message(self, content: str) -> None:
        """Appends a user message. Raises ValueError if a user message is already pending."""
        if self.has_pending_turn:
            raise ValueError("A user message is already waiting for its reply; finish or roll back that turn first.")
        self.history.append(Message("user", content))

    def rollback_last_user_message(self) -> None:
        """Removes the pending user message, if there is one; otherwise does nothing."""
        if self.has_pending_turn:
            self.history.pop()

    def format_messages(self, messages: list[Message] | tuple[Message, ...]) -> str:
        return "\n".join(f"{message['role']}: {message['content']}" for message in messages)

    def count_input_tokens(self, messages: list[Message] | tuple[Message, ...]) -> int:
        """The request's instructions plus ``messages``, counted by this memory's token counter."""
        return self.token_counter.count(self.model, self.request_instructions(), messages)

    def update_summary(self, new_messages: list[Message] | tuple[Message, ...]) -> int:
        """Merges ``new_messages`` into the summary without moving the pointer.

        Kept for the article's API; ``prepare_context`` folds through
        ``fold_through`` instead, which moves summary and pointer together.
        Returns the tokens the summary request used.
        """
        version = self._summarize(tuple(new_messages), self.summarized_message_count, self.summarized_message_count)
        self.summary_versions.append(version)
        return version.tokens

    def create_context_messages(self, recent_messages: list[Message], current_user_message: Message) -> list[Message]:
        """The summary, ``recent_messages`` and ``current_user_message``, in the wire's roles.

        On a server that keeps only one system message (``ServerProfile``), the
        instructions and the summary lead as that one message; elsewhere the
        summary is the article's ``developer`` message and the instructions go apart.
        """
        if self.backend.profile.single_system_message:
            parts = [self.system_prompt.rstrip(), self.summary_message().content] if self.summary else [self.system_prompt]
            system = "\n\n".join(part for part in parts if part)
            context = [Message("system", system)] if system else []
        else:
            context = [self.summary_message()] if self.summary else []
        return [*context, *recent_messages, current_user_message]

    def request_instructions(self) -> str:
        """What a reply request sends as its instructions: empty when they lead the context as its system message."""
        return "" if self.backend.profile.single_system_message else self.system_prompt

    def prepare_context(self) -> dict[str, Any]:
        """Folds what must leave the window or the budget, and returns the article's dict."""
        return self.prepare().as_dict()

    def finish_turn(
        self,
        assistant_reply: str,
        context_messages: list[Message] | tuple[Message, ...],
        response_tokens: int,
        *,
        usage: Usage | None = None,
        latency_s: float = 0.0,
        cut: bool = False,
    ) -> TurnStats:
        """Completes the pending turn with the assistant's reply.

        ``usage`` is the reply's billed usage, when the caller has it; without it
        the ledger records only ``response_tokens`` as the request's total.
        ``cut`` says the reply stopped at its output cap; it is kept, and marked.
        A server's plausible input count teaches the calibration.
        Raises ValueError when no user message is pending.
        """
        if not self.has_pending_turn:
            raise ValueError("There is no pending user message to reply to.")
        prepared = self.last_prepared
        counted = prepared.input_tokens if prepared else self.count_input_tokens(list(context_messages))
        common = {"turn": self.turn_number, "kind": "reply", "model": self.served_by, "counted_input_tokens": counted}
        extra = {"full_history_tokens": self.full_history_tokens(), "cut": cut, "input_budget": self.max_input_tokens}
        if usage is None:
            record = UsageRecord(**common, input_tokens=None, output_tokens=None, total_tokens=response_tokens, latency_s=latency_s, **extra)
        else:
            record = UsageRecord.of(**common, usage=usage, latency_s=latency_s, **extra)
        self._learn(record)
        self.ledger.append(record)
        self.history.append(Message("assistant", assistant_reply))
        self.last_context = list(context_messages)
        stats = TurnStats(
            turn=record.turn,
            newly_summarized_count=prepared.newly_summarized_count if prepared else 0,
            context_messages=len(context_messages),
            counted_input_tokens=counted,
            input_tokens=record.input_tokens,
            output_tokens=record.output_tokens,
            summary_token_usage=prepared.summary_token_usage if prepared else 0,
            session_total_tokens=self.session_total_tokens,
            estimated=record.estimated,
            cut=record.cut,
            over_budget=record.over_budget,
            implausible=record.implausible,
        )
        self.turn_stats[len(self.history) - 1] = stats
        return stats

    def get_status(self) -> dict[str, int | bool]:
        return {
            "History messages": len(self.history),
            "Summarized messages": self.summarized_message_count,
            "Last context messages": len(self.last_context),
            "Summary available": bool(self.summary),
            "Session total tokens": self.session_total_tokens,
        }

    # -- transactional turns ------------------------------------------------

    @contextmanager
    def turn(self, user_text: str) -> Iterator[Turn]:
        """One user turn that either completes or leaves no trace in the history.

        Appends the user message, yields a ``Turn``, and on leaving the block
        removes the message again unless the reply was committed: after any
        exception, BaseException included (Streamlit's stop and rerun), and after
        a stream abandoned half-way. The user's text stays on ``turn.user_text``.
        Summaries folded before the failure stay folded; they are consistent.
        Raises ValueError for an empty message, and LimitReached (a ValueError)
        when a session limit refuses it; nothing is appended then.
        """
        self._check_limits(user_text)
        self.add_user_message(user_text)
        active = Turn(self, user_text)
        try:
            yield active
        finally:
            if not active.committed:
                self.rollback_last_user_message()

    def check_new_message(self, user_text: str) -> None:
        """Refuses, before anything is stored, sent or drawn, a message no turn could take.

        Raises ValueError for an empty or blank message, LimitReached when a
        session limit refuses it (the character cap first, so a huge paste is
        never tokenized), and ContextBudgetError when the message alone, with
        the instructions and the current summary, exceeds ``max_input_tokens``
        (local count). Returns None when a turn may start. A page calls it first,
        so that a refused message is never drawn; ``turn`` itself leaves the budget check to ``prepare``, inside the turn, so that
        ``turn.user_text`` holds the text then.
        """
        self._check_limits(user_text)
        fixed = self._instructions_tokens() + REPLY_PRIMING_TOKENS + count_message("user", user_text)
        if fixed > self.local_budget():
            raise self._budget_error(fixed + self._current_summary_tokens())

    def _check_limits(self, user_text: str) -> None:
        if not user_text.strip():
            raise ValueError("The message is empty.")
        self.limits.check(user_text, len(self.history) // 2, self.session_total_tokens)

    @property
    def served_by(self) -> str:
        """The model named in the ledger: ``"offline"`` when the offline engine answers, as no model does then."""
        return "offline" if self.backend.offline else self.model

    @property
    def has_pending_turn(self) -> bool:
        return bool(self.history) and self.history[-1].role == "user"

    @property
    def turn_number(self) -> int:
        """The 1-based number of the current (or, between turns, the last) user turn."""
        return (len(self.history) + 1) // 2

    # -- context planning -----------------------------------------------------

    def summary_message(self) -> Message:
        return Message("developer", SUMMARY_PREAMBLE + self.summary)

    def prepare(self) -> PreparedContext:
        """Builds this turn's context, folding into the summary what must leave.

        Pairs that left the window, and then the oldest pairs while the budget is
        exceeded, are folded in one summary request, planned from local counts
        with room reserved for a full-length summary. A second request happens
        only if the counter in use (the API's, say) disagrees with the plan.
        Raises ValueError without a pending user message, and
        ContextBudgetError when even summary plus current message do not fit;
        it raises that before any summary request when the message alone is too big.
        """
        if not self.history:
            raise ValueError("The conversation history is empty.")
        if not self.has_pending_turn:
            raise ValueError("The last message must be a user message before building the context.")

        current = len(self.history) - 1
        versions_before, pointer_before = len(self.summary_versions), self.summarized_message_count
        self.last_prepared = None
        start = self._plan_window_start(current)
        while True:
            if start > self.summarized_message_count:
                self.fold_through(start)
            spent = sum(v.tokens for v in self.summary_versions[versions_before:])
            prepared = self._context_from(start, current, spent, start - pointer_before)
            if prepared.input_tokens <= self.local_budget():
                self.last_prepared = prepared
                return prepared
            if start >= current:
                raise self._budget_error(prepared.input_tokens)
            start += 2

    def fold_through(self, end: int) -> SummaryVersion:
        """Folds ``history[summarized_message_count:end]`` into the summary; returns the last version.

        One summary request, unless the messages do not fit one request within
        the budget: then they fold in consecutive pieces of whole pairs, each a
        request and a version of its own, and a pair too big even alone has its
        messages' middles cut with a marker (``SummaryVersion.clipped``). Each
        piece moves summary and pointer together, in one assignment, or not at
        all: a failed request leaves the pieces before it folded and the rest
        as they were. ``end`` must be even and must not pass the completed pairs.
        """
        start = self.summarized_message_count
        completed = len(self.history) - (1 if self.has_pending_turn else 0)
        if end % 2 or not start < end <= completed:
            raise ValueError(f"cannot fold messages {start}..{end} of {completed} completed")
        room = self._fold_room()
        while start < end:
            piece_end, size = start + 2, self._pair_tokens(start)
            while piece_end < end and size + self._pair_tokens(piece_end) <= room:
                size += self._pair_tokens(piece_end)
                piece_end += 2
            self.summary_versions.append(self._summarize(tuple(self.history[start:piece_end]), start, piece_end))
            start = piece_end
        return self.summary_versions[-1]

    # -- folding ahead of the next turn ---------------------------------------

    def fold_due(self) -> int:
        """The history index the next turn's ``prepare()`` is certain to fold through.

        Between turns, whatever the next user message turns out to be, the next
        ``prepare()`` will fold at least ``history[summarized_message_count:fold_due()]``:
        the pairs that leave the recent window when the message arrives (after
        ``fold_batch_turns`` extra turns, as ``prepare()`` does), and the oldest
        pairs that would not fit the budget even beside the shortest possible
        message. Planned from local counts under the current limits; makes no request.
        Returns ``summarized_message_count`` when nothing is due.
        Raises ValueError while a user message is pending.
        """
        if self.has_pending_turn:
            raise ValueError("A user message is pending; its prepare() does the folding.")
        # A message shorter than any real one: folding more for it could never be wasted.
        return self._plan_window_start(len(self.history), current_tokens=count_message("user", ""))

    def prefold(self) -> SummaryVersion | None:
        """Folds now, in one summary request, what the next turn is certain to fold.

        Meant to be called right after a reply is committed, while the user reads
        and types: the next ``prepare()`` then finds the summary already up to
        date and sends the reply request without waiting for a summary request.
        Returns the new ``SummaryVersion``, or None (and makes no request) when
        ``fold_due()`` finds nothing to fold.

        Transactional like ``fold_through``: summary and pointer move together or
        not at all. If the request fails, the error (``BackendError``, or
        ``SummaryError`` for an empty summary) propagates and the memory is as
        before; the next ``prepare()`` folds the same messages itself. The ledger
        records the summary request under the turn just finished.
        If the limits change before the next message (a wider window, say),
        what was folded stays folded.
        Raises ValueError while a user message is pending, and LimitReached,
        making no request, when the session's turn or token cap already refuses
        the next turn (an imported conversation at its cap, say).
        """
        end = self.fold_due()
        if end <= self.summarized_message_count:
            return None
        # A summary request is a request like any other: the caps that would refuse the next turn refuse it too.
        self.limits.check_spend(len(self.history) // 2, self.session_total_tokens)
        return self.fold_through(end)

    def full_history_tokens(self) -> int:
        """What one request with every message in history would cost, instructions included."""
        counted, tokens, last = self._history_tokens
        # The running sum holds only while the history still ends, at ``counted``, with the
        # message it was taken at: a rollback followed by a new message must recount.
        if counted > len(self.history) or (counted and self.history[counted - 1] is not last):
            counted, tokens = 0, 0
        tokens += sum(count_message(m.role, m.content) for m in self.history[counted:])
        self._history_tokens = (len(self.history), tokens, self.history[-1] if self.history else None)
        return self._instructions_tokens() + REPLY_PRIMING_TOKENS + tokens

    def _plan_window_start(self, current: int, current_tokens: int | None = None) -> int:
        """The first history index that stays verbatim, from local counts alone.

        ``current_tokens`` stands in for the tokens of ``history[current]`` when
        planning for a message not yet in the history (``fold_due``).
        """
        pointer = self.summarized_message_count
        window_limit = 2 * self.max_recent_turns
        start = pointer
        if current - pointer > 2 * (self.max_recent_turns + self.fold_batch_turns):
            start = current - window_limit
        message = self._message_tokens(current) if current_tokens is None else current_tokens
        fixed = self._instructions_tokens() + REPLY_PRIMING_TOKENS + message
        window = sum(self._message_tokens(i) for i in range(start, current))

        def summary_cost() -> int:
            return self._reserved_summary_tokens() if start > pointer else self._current_summary_tokens()

        budget = self.local_budget()
        if fixed > budget:
            raise self._budget_error(fixed + self._current_summary_tokens())
        while fixed + summary_cost() + window > budget and start < current:
            window -= self._message_tokens(start) + self._message_tokens(start + 1)
            start += 2
        if self.fold_batch_turns and start > pointer:
            # The budget forced a fold before the batch was full: fold the whole batch in this
            # request, back to max_recent_turns, or every later turn would fold one pair again.
            start = max(start, current - window_limit)
        return start

    def _context_from(self, start: int, current: int, spent: int, folded: int) -> PreparedContext:
        recent = self.history[start:current]
        messages = tuple(self.create_context_messages(recent, self.history[current]))
        lead: Source = "summary"
        if self.backend.profile.single_system_message:
            lead = "instructions_summary" if self.summary else "instructions"
        sources: tuple[Source, ...] = (lead,) * (len(messages) - len(recent) - 1) + ("window",) * len(recent) + ("current",)
        return PreparedContext(
            instructions=self.request_instructions(),
            context_messages=messages,
            sources=sources,
            message_tokens=tuple(count_message(m.role, m.content) for m in messages),
            input_tokens=self.count_input_tokens(messages),
            summary_token_usage=spent,
            newly_summarized_count=folded,
        )

    def _summarize(self, new_messages: tuple[Message, ...], start: int, end: int) -> SummaryVersion:
        sent = self._clip_for_summary(new_messages)
        request = SummaryRequest(
            model=self.model,
            instructions=self.summary_instructions,
            existing_summary=self.summary,
            new_messages=sent,
            max_output_tokens=self.max_summary_tokens,
        )
        counted = self._local.count(self.model, request.instructions, [Message("user", request.input_text)])
        began = time.perf_counter()
        completion = self.backend.summarize(request)
        record = UsageRecord.of(
            turn=self.turn_number,
            kind="summary",
            model=self.served_by,
            counted_input_tokens=counted,
            usage=completion.usage,
            latency_s=time.perf_counter() - began,
            cut=completion.cut,
            input_budget=self.max_input_tokens,
        )
        self._learn(record)
        self.ledger.append(record)
        text = completion.text.strip()
        bounded = truncate_text(text, self.max_summary_tokens)
        cut = completion.cut or bounded != text
        if cut:
            text = whole_sentences(bounded)
        if not text and new_messages:
            raise SummaryError("The model returned an empty summary; the previous summary is kept.")
        clipped = sum(a is not b for a, b in zip(new_messages, sent))
        return SummaryVersion(text, end, (start, end), completion.usage.total_tokens, self.turn_number, cut, clipped)

    def _clip_for_summary(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """``messages``, with the middles of the largest cut so that the summary request fits the budget.

        Messages smaller than an even share of the room are kept whole; the
        others share what is left. Unchanged messages are the same objects.
        """
        room = self._fold_room()
        costs = [count_message(m.role, m.content) for m in messages]
        if sum(costs) <= room:
            return messages
        share = room // len(messages)
        large = [i for i, cost in enumerate(costs) if cost > share]
        left = (room - sum(cost for i, cost in enumerate(costs) if i not in large)) // len(large)
        overhead = count_message(messages[0].role, "")
        return tuple(
            Message(m.role, clip_middle(m.content, left - overhead)) if i in large else m for i, m in enumerate(messages)
        )

    def _learn(self, record: UsageRecord) -> None:
        if record.billed and record.input_tokens is not None:
            self.calibration = self.calibration.learn(record.counted_input_tokens, record.input_tokens)

    def _budget_error(self, local_tokens: int) -> ContextBudgetError:
        return ContextBudgetError(self.calibration.server_estimate(local_tokens), self.max_input_tokens)

    def _summary_request_overhead(self) -> int:
        """Local tokens of a summary request without its messages: instructions, layout and a full-length summary."""
        empty = SummaryRequest(self.model, self.summary_instructions, "", (), self.max_summary_tokens)
        return (
            count_message("system", self.summary_instructions)
            + count_message("user", empty.input_text)
            + REPLY_PRIMING_TOKENS
            + self.max_summary_tokens
            + 1
        )

    def _fold_room(self) -> int:
        """Local tokens one summary request has for the messages it folds, within the budget."""
        return max(MIN_FOLD_ROOM, self.local_budget() - self._summary_request_overhead())

    def _pair_tokens(self, index: int) -> int:
        return self._message_tokens(index) + self._message_tokens(index + 1)

    def _message_tokens(self, index: int) -> int:
        message = self.history[index]
        return count_message(message.role, message.content)

    def _instructions_tokens(self) -> int:
        return count_message("system", self.system_prompt) if self.system_prompt else 0

    def _reserved_summary_tokens(self) -> int:
        # +1: the preamble and the summary may not split at a token boundary.
        return count_message("developer", SUMMARY_PREAMBLE) + self.max_summary_tokens + 1

    def _current_summary_tokens(self) -> int:
        return count_message("developer", SUMMARY_PREAMBLE + self.summary) if self.summary else 0


class Turn:
    """One user turn in progress; see ``ShortTermMemory.turn``."""

    def __init__(self, memory: ShortTermMemory, user_text: str) -> None:
        self.memory = memory
        self.user_text = user_text
        self.prepared: PreparedContext | None = None
        self.stats: TurnStats | None = None
        self.reply: str | None = None

    @property
    def committed(self) -> bool:
        return self.stats is not None

    def stream(self) -> Iterator[str]:
        """Prepares the context, yields the reply's text as it arrives, then commits.

        The turn is committed only after the model's final event. If the stream
        fails or is abandoned part-way, nothing of the reply is kept, and the
        enclosing ``with memory.turn(...)`` rolls the user message back.
        """
        memory = self.memory
        self.prepared = prepared = memory.prepare()
        request = ReplyRequest(
            model=memory.model,
            instructions=prepared.instructions,
            messages=prepared.context_messages,
            counted_input_tokens=prepared.input_tokens,
            input_budget=memory.max_input_tokens,
            max_output_tokens=memory.max_reply_tokens,
        )
        began = time.perf_counter()
        for item in memory.backend.stream_reply(request):
            if isinstance(item, Completion):
                self._commit(item, began)
                return
            yield item
        raise BackendError("The model's stream ended before the response was complete.")

    def run(self) -> str:
        """Runs the whole turn without streaming; returns the reply text."""
        for _ in self.stream():
            pass
        assert self.reply is not None
        return self.reply

    def _commit(self, completion: Completion, began: float) -> None:
        assert self.prepared is not None
        self.reply = completion.text
        self.stats = self.memory.finish_turn(
            completion.text,
            self.prepared.context_messages,
            completion.usage.total_tokens,
            usage=completion.usage,
            latency_s=time.perf_counter() - began,
            cut=completion.cut,
        )


# Latin ends need a space after them ("3.5" is no end); CJK text has none between sentences.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|$)|[。！？][」』”’）]*|\n")


def whole_sentences(text: str) -> str:
    """``text`` up to its last whole sentence, for a summary the model did not finish.

    A sentence ends at ``.``, ``!`` or ``?`` before a space, at their CJK forms, or
    at a line break. Without any such end, it keeps the whole words and adds
    ``…``, so a cut summary is never empty while it had words.
    """
    text = text.rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if ends:
        return text[: ends[-1]].rstrip()
    words = text.rsplit(maxsplit=1)[0] if " " in text else text
    return f"{words}…" if words else ""
