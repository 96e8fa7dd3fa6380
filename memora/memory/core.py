"""ShortTermMemory: one conversation's history, summary and ledger, and what each request sends.

The article's Memora v0.7 API is kept name for name, so its main loop runs
against this class unchanged. The budget rule itself is ``planner.plan_context``;
summary requests are ``summarizer.Summarizer``; a transactional turn is ``turn.Turn``;
the article's own method names are ``article_api.ArticleAPI``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from memora.backends import Backend, BackendError, as_backend
from memora.backends.openai_errors import ContextOverflowError
from memora.memory.article_api import ArticleAPI
from memora.memory.context import sources
from memora.memory.hook import ChangeHook
from memora.memory.limits import SessionLimits
from memora.memory.planner import Plan, plan_folds
from memora.memory.prefold import certain_fold, expected_message
from memora.memory.sizes import Sizes, check_limits, request_sizes
from memora.memory.summarizer import check_summary, fold_pieces, summary_texts
from memora.memory.turn import Turn, transaction
from memora.memory.values import (
    DEFAULT_MODEL,
    MAX_INPUT_TOKENS,
    MAX_RECENT_TURNS,
    MAX_REPLY_TOKENS,
    MAX_SUMMARY_TOKENS,
    ContextBudgetError,
    FoldPolicy,
    PreparedContext,
    SummaryVersion,
    TurnStats,
)
from memora.messages import Message
from memora.prompts import SUMMARY_INSTRUCTIONS, SUMMARY_PREAMBLE, SYSTEM_PROMPT, with_summary_cap
from memora.tokens import REPLY_PRIMING_TOKENS, LocalTokenCounter, TextTokens, TokenCounter, count_message
from memora.tokens.calibration import Calibration, Kind, kind_tokens, request_kinds
from memora.tokens.usage import Ledger, UsageRecord


class ShortTermMemory(ArticleAPI, ChangeHook):
    """The short-term memory of one conversation.

    ``history`` holds every message in full, as user/assistant pairs, possibly followed by one pending
    user message; ``history[:summarized_message_count]`` is folded into ``summary``, the other completed
    pairs form the recent window. ``client`` is a memora backend or an ``openai.OpenAI`` client. Budgets
    are the server's tokens; plans use local o200k_base counts against ``local_budget()``, which
    ``calibration`` learns from what the server reports. ``fold_policy`` is the article's ``window``
    (the default) or ``watermark``; ``fold_batch_turns`` lets the window grow that many pairs before
    folding; ``max_reply_tokens`` caps each reply (None: no cap); ``context_window`` is the server's
    context size, when known; ``limits`` are the session's caps. ``lock`` guards against two script
    threads of one session. ``on_change`` (``hook.ChangeHook``) is called after each committed turn and fold.
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
        fold_policy: FoldPolicy = "window",
    ) -> None:
        self.switch_backend(as_backend(client), model, token_counter)
        self.client = client
        self.system_prompt, self.summary_instructions = system_prompt, summary_instructions
        self.max_summary_tokens, self.max_reply_tokens, self.context_window = max_summary_tokens, max_reply_tokens, context_window
        self.max_input_tokens, self.max_recent_turns, self.fold_batch_turns = max_input_tokens, max_recent_turns, fold_batch_turns
        self.limits, self.fold_policy = limits or SessionLimits(), fold_policy  # the planner's rule: see planner.plan_folds
        self.update_limits(max_input_tokens=max_input_tokens, max_recent_turns=max_recent_turns)
        self.lock = threading.RLock()
        self.restore()

    def __getstate__(self) -> dict[str, Any]:
        # A lock cannot be copied; a copy is not the conversation its hook saves, so it has none.
        return {name: value for name, value in vars(self).items() if name not in ("lock", "on_change")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state, lock=threading.RLock())

    def restore(
        self,
        history: Sequence[Message] = (),
        summary_versions: Sequence[SummaryVersion] = (),
        ledger: Sequence[UsageRecord] = (),
        last_context: Sequence[Message] = (),
    ) -> None:
        """Replaces the conversation's state at once (an empty one by default). The caller validates it."""
        self.history, self.summary_versions = list(history), list(summary_versions)
        self.calibration = self.calibration.seeing([*(m.content for m in self.history), self.summary])
        self._tokens = TextTokens()  # each message and summary tokenized once (see TextTokens)
        # Each history message's tokens, kept beside it as the history changes (only through ``_append`` and
        # ``_pop``): a turn plans from a slice of it instead of looking every unfolded message up again.
        self._history_counts = [self.message_tokens(m) for m in self.history]
        self._history_tokens = sum(self._history_counts)
        self.ledger, self.last_context = Ledger(ledger), list(last_context)
        self.last_prepared: PreparedContext | None = None
        self.last_plan: Plan | None = None
        self.last_fold_plan: Plan | None = None  # the plan of the last fold, for "why did it fold?"

    def update_limits(
        self, *, max_input_tokens: int | None = None, max_recent_turns: int | None = None, fold_policy: FoldPolicy | None = None
    ) -> None:
        """Changes the budget, the window or the fold policy, from the next request; raises ValueError, changing
        nothing, for a window below 0, a budget below ``minimum_budget()``, or one that overflows ``context_window``."""
        budget = self.max_input_tokens if max_input_tokens is None else max_input_tokens
        recent = self.max_recent_turns if max_recent_turns is None else max_recent_turns
        output = max(self.max_reply_tokens or 0, self.max_summary_tokens)
        check_limits(budget, recent, self.minimum_budget(), output, self.context_window, self.fold_batch_turns)
        self.max_input_tokens, self.max_recent_turns, self.fold_policy = budget, recent, fold_policy or self.fold_policy

    def window_too_small(self) -> bool:
        """Whether the server's context window, learned from an overflow error, cannot hold even the largest
        output: no fold or cut can make a request fit it, and only a setting can."""
        output = max(self.max_reply_tokens or 0, self.max_summary_tokens)
        return self.server_window is not None and self.server_window <= output

    def budget_in_force(self) -> int:
        """``max_input_tokens``, or less when the server's context window, learned from an overflow error,
        leaves less room beside the largest output."""
        if self.server_window is None:
            return self.max_input_tokens
        output = max(self.max_reply_tokens or 0, self.max_summary_tokens)
        return max(1, min(self.max_input_tokens, self.server_window - output))

    def minimum_budget(self) -> int:
        """The smallest budget, in the server's tokens, for a reply and for a summary request."""
        return self.calibration.server_estimate(self._sizes().minimum_budget)

    def local_budget(self) -> int:
        """``max_input_tokens`` in local tokens, as the calibration makes it hold by the server's count.

        Without the server's own count, every local token is planned at the highest ratio among the kinds of
        text the conversation holds: a plan must hold whatever share of Chinese the request ends up with. Where
        the server counts each request before it is sent (``exact_source``), that count holds the budget, and
        the plan only has to be close: it weighs each kind's ratio by its share of the texts a request may
        carry (instructions, summary, unfolded messages), so that English instructions are not planned as Chinese.
        """
        if self.calibration.exact or self.exact_source() is None:
            return self.calibration.local_budget(self.budget_in_force())
        texts = [self.system_prompt, self.summary, *(m.content for m in self.history[self.summarized_message_count :])]
        kinds: dict[Kind, int] = {}
        for text in texts:
            for kind, tokens in kind_tokens(text).items():
                kinds[kind] = kinds.get(kind, 0) + tokens
        return math.floor(self.budget_in_force() / self.calibration.mix_ratio(kinds))

    @property
    def counts_exactly(self) -> bool:
        """Whether the budget is held by the server's own count: OpenAI's tokenizer is o200k_base (local counts
        are its counts), or the server has a tokenizer endpoint that counts each request before it is sent."""
        return self.calibration.exact or self.exact_source() is not None

    @property
    def counting(self) -> str:
        """Which count the budget uses, in words, for the Status panel and the REPL."""
        source = self.exact_source()
        if source is not None:
            return f"the server's tokenizer, exact ({source})"
        if self.calibration.exact:
            return "local o200k_base, the server's own tokenizer: exact"
        return "local, with a learned margin"

    def exact_source(self) -> str | None:
        """The server's tokenizer endpoint that counts each request (``"llama.cpp /apply-template + /tokenize"``), or None."""
        if self.calibration.exact:
            return None
        tokenizer = getattr(self.backend, "server_tokenizer", None)
        found = tokenizer(self.model) if callable(tokenizer) else None
        return getattr(found, "source", None) if found is not None else None

    def _exact(self, instructions: str, messages: Sequence[Message]) -> int | None:
        """The server's own count of a request, template included; None where it has no tokenizer endpoint."""
        if self.calibration.exact:
            return None  # o200k_base is the server's tokenizer: the local count is exact
        count = getattr(self.backend, "count_exact", None)
        return count(self.model, instructions, messages) if callable(count) else None

    def _learn(self, local: int, server: int, texts: Sequence[str]) -> None:
        """Teaches the calibration a count the server itself made (never a figure it estimated)."""
        self.calibration = self.calibration.learn(local, server, request_kinds(local, texts))

    def switch_backend(self, backend: Backend, model: str, token_counter: TokenCounter | None = None) -> None:
        """Continues on ``backend`` and ``model`` from the next request; the new server's count is learned afresh."""
        self.backend, self.client, self.model = backend, backend, model
        self.token_counter: TokenCounter = token_counter or LocalTokenCounter()
        self.calibration = Calibration(exact=backend.profile.counts_like_o200k)
        self.server_window: int | None = None  # the server's context window, as an overflow error gave it

    # -- turns ----------------------------------------------------------------

    def turn(self, user_text: str) -> AbstractContextManager[Turn]:
        """One user turn that completes or leaves no trace in the history (see ``turn.transaction``)."""
        return transaction(self, user_text)

    def check_new_message(self, user_text: str) -> None:
        """Refuses, before anything is stored, sent or drawn, a message no turn could take: ``check_limits``
        (the character cap first, so a pasted book is never tokenized), then ContextBudgetError when the
        message with instructions and summary is over the budget (``turn`` leaves that check to ``prepare``)."""
        self.check_limits(user_text)
        self.calibration = self.calibration.seeing([user_text])
        self._check_message_alone(self._tokens.message("user", user_text), user_text)

    @property
    def turn_stats(self) -> dict[int, TurnStats]:
        """Each finished turn's stats, derived from the ledger, by the history index of its reply."""
        return TurnStats.by_reply_index(self.ledger)

    @property
    def served_by(self) -> str:
        """The model named in the ledger: ``"offline"`` when the offline engine answers."""
        return "offline" if self.backend.offline else self.model

    @property
    def has_pending_turn(self) -> bool:
        return bool(self.history) and self.history[-1].role == "user"

    @property
    def turn_number(self) -> int:
        """The 1-based number of the current (or, between turns, the last) user turn."""
        return (len(self.history) + 1) // 2

    # -- planning and folding --------------------------------------------------

    def plan(self, current: int, message_tokens: int) -> Plan:
        """The fold policy's plan (``planner``) for a message of ``message_tokens`` at history index ``current``."""
        self._check_message_alone(message_tokens, self.history[current].content)
        self.last_plan = self._plan_for(self._unfolded_tokens(current), message_tokens)
        if self.last_plan.fold:
            self.last_fold_plan = self.last_plan
        return self.last_plan

    def _plan_for(self, unfolded: Sequence[int], message_tokens: int) -> Plan:
        sizes = self._sizes()
        return plan_folds(
            self.fold_policy, unfolded, message=message_tokens, fixed=sizes.fixed, summary=self._summary_tokens(),
            full_summary=sizes.full_summary, budget=self.local_budget(), max_recent_turns=self.max_recent_turns,
            fold_batch_turns=self.fold_batch_turns,
        )  # fmt: skip

    def _unfolded_tokens(self, current: int) -> list[int]:
        return self._history_counts[self.summarized_message_count : current]

    def _summary_tokens(self) -> int:
        """``Sizes.summary`` of the current summary, counted once per summary."""
        return self._tokens.message("developer", SUMMARY_PREAMBLE + self.summary) if self.summary else 0

    def message_tokens(self, message: Message) -> int:
        """The local tokens ``message`` adds to a request, its text tokenized once per conversation."""
        return self._tokens.message(message.role, message.content)

    def prepare(self) -> PreparedContext:
        """Builds this turn's context, folding into the summary what ``plan`` says must leave.

        Raises ValueError without a pending user message, and ContextBudgetError when even
        the summary plus the message do not fit (before any request, for a message too big alone).
        """
        if not self.history:
            raise ValueError("The conversation history is empty.")
        if not self.has_pending_turn:
            raise ValueError("The last message must be a user message before building the context.")
        current, versions, pointer = len(self.history) - 1, len(self.summary_versions), self.summarized_message_count
        start = pointer + self.plan(current, self.message_tokens(self.history[current])).fold
        while True:
            if start > self.summarized_message_count:
                self.fold_through(start)
            prepared = self._context_from(start, current, sum(v.tokens for v in self.summary_versions[versions:]), start - pointer)
            exact = self._exact(prepared.instructions, prepared.context_messages)
            if exact is not None:
                self._learn(prepared.input_tokens, exact, [prepared.instructions, *(m.content for m in prepared.context_messages)])
                prepared = replace(prepared, server_input_tokens=exact)
            if (prepared.input_tokens <= self.local_budget()) if exact is None else (exact <= self.budget_in_force()):
                self.last_prepared = prepared
                return prepared
            if start >= current:
                raise self._budget_error(prepared.input_tokens, exact)
            start += 2  # the server's count (or the API's) disagreed with the local plan: one more pair leaves

    def fold_through(self, end: int) -> SummaryVersion:
        """Folds ``history[summarized_message_count:end]``, in as few requests as fit the budget (``fold_pieces``).

        Each request moves summary and pointer together or not at all; a failure keeps the pieces
        before it. ``end`` must be even and within the completed pairs. Returns the last version.
        """
        start, completed = self.summarized_message_count, len(self.history) - self.has_pending_turn
        if end % 2 or not start < end <= completed:
            raise ValueError(f"cannot fold messages {start}..{end} of {completed} completed")
        counts = self._history_counts
        pairs = [counts[i] + counts[i + 1] for i in range(start, end, 2)]
        for count in fold_pieces(pairs, self._fold_room()):
            self._fold(tuple(self.history[start : start + 2 * count]), (start, start + 2 * count))
            start += 2 * count
        return self.summary_versions[-1]

    def fold_due(self) -> int:
        """The history index a prefold folds through now; ``summarized_message_count`` when nothing is due.

        ``planner.expected_message`` says which message to plan for and ``planner.certain_fold`` how much
        of that plan may be folded before the real message is known. Makes no request.
        Raises ValueError while a user message is pending."""
        return self._prefold_plan()[0]

    def _prefold_plan(self) -> tuple[int, Plan]:
        if self.has_pending_turn:
            raise ValueError("A user message is pending; its prepare() does the folding.")
        pointer, unfolded = self.summarized_message_count, self._unfolded_tokens(len(self.history))
        message = expected_message(self.fold_policy, unfolded[::2])
        self._check_message_alone(message)
        expected = self._plan_for(unfolded, message)
        if not expected.fold:  # certain_fold never folds more than the expected plan: most turns stop here
            return pointer, expected
        shortest = self._plan_for(unfolded, expected_message("window", ()))
        fold = certain_fold(self.fold_policy, expected, shortest, max(0, len(unfolded) - 2 * self.max_recent_turns))
        return pointer + fold, expected

    def prefold(self) -> SummaryVersion | None:
        """Folds now what the next turn is certain to fold, so its reply waits for no summary.

        None (no request) when nothing is due. Raises LimitReached, sending nothing, when a session
        cap would refuse the next turn; a failed request leaves the memory as it was.
        """
        with self.lock:
            end, plan = self._prefold_plan()
            if end <= self.summarized_message_count:
                return None
            # A summary request is a request like any other: the caps that would refuse the next turn refuse it too.
            self.limits.check_spend(len(self.history) // 2, self.session_total_tokens)
            version = self.fold_through(end)
            self.last_fold_plan = plan  # only once something was folded: the Status panel says why
            return version

    def finished_message_tokens(self) -> tuple[int, ...]:
        """Each message's local tokens, as planning counts them, for the finished user/reply pairs (a pending
        message is left out); a copy, safe to read while a reply job appends (``memora.memory.replay``)."""
        counts = tuple(self._history_counts)
        return counts[: len(counts) - len(counts) % 2]

    def full_history_tokens(self) -> int:
        """What one request with every message in history would cost, instructions included."""
        return self._sizes().fixed + self._history_tokens

    def _append(self, message: Message) -> None:
        self.calibration = self.calibration.seeing([message.content])
        tokens = self.message_tokens(message)
        self.history.append(message)
        self._history_counts.append(tokens)
        self._history_tokens += tokens

    def _pop(self) -> Message:
        self._history_tokens -= self._history_counts.pop()
        return self.history.pop()

    def _fold(self, messages: tuple[Message, ...], span: tuple[int, int]) -> SummaryVersion:
        """One summary request, held to the budget by the server's own count where it has one. A context-overflow
        error teaches its figures, and the request is cut to the room they leave and sent once more."""
        try:
            version, record = self._summarize(messages, span)
        except ContextOverflowError as overflow:
            self._learn_overflow(overflow, self._summary_request_tokens(messages), summary_texts(self.summary, messages))
            if self.window_too_small():
                raise self._overflow_error() from None
            try:
                version, record = self._summarize(messages, span)
            except ContextOverflowError:
                raise self._overflow_error() from None
        self._record(record, summary_texts(self.summary, messages))
        self.calibration = self.calibration.seeing([version.text])
        check_summary(version, messages)
        self.summary_versions.append(version)
        self._changed("fold")
        return version

    def _summarize(self, messages: tuple[Message, ...], span: tuple[int, int]) -> tuple[SummaryVersion, UsageRecord]:
        exact = getattr(self.backend, "count_exact", None)
        return self._sizes().summarizer.fold(
            self.backend,
            self.summary,
            messages,
            span,
            self._fold_room(),
            message_tokens=tuple(self.message_tokens(m) for m in messages),
            turn=self.turn_number,
            served_by=self.served_by,
            input_budget=self.budget_in_force(),
            exact=None if self.calibration.exact or not callable(exact) else exact,
            learn=self._learn,
        )

    def _summary_request_tokens(self, messages: tuple[Message, ...]) -> int:
        return self._sizes().summary_request + sum(self.message_tokens(m) for m in messages)

    def learn_overflow(self, overflow: ContextOverflowError, prepared: PreparedContext) -> None:
        """Learns what a reply request's context-overflow error says: the server's count of the request,
        and its context window, so that the next ``prepare`` folds or cuts to fit them."""
        self._learn_overflow(overflow, prepared.input_tokens, [prepared.instructions, *(m.content for m in prepared.context_messages)])

    def _learn_overflow(self, overflow: ContextOverflowError, local: int, texts: Sequence[str]) -> None:
        if overflow.prompt_tokens is not None:
            self._learn(local, overflow.prompt_tokens, texts)
        if overflow.window is not None:
            self.server_window = overflow.window if self.server_window is None else min(self.server_window, overflow.window)
        elif overflow.prompt_tokens is None:
            # No figure at all: plan as if the server counted a quarter more than the margin did.
            self._learn(local, math.ceil(self.calibration.server_estimate(local) * 1.25), texts)

    def _overflow_error(self) -> BackendError:
        return BackendError(
            "The model server's context window is smaller than Memora's budget, even after folding and cutting to the "
            "figures it gave. Lower MEMORA_MAX_INPUT_TOKENS or set MEMORA_CONTEXT_WINDOW to the server's context size "
            "(llama.cpp: --n_ctx). Your message is kept."
        )

    def _context_from(self, start: int, current: int, spent: int, folded: int) -> PreparedContext:
        recent = self.history[start:current]
        messages = tuple(self.create_context_messages(recent, self.history[current]))
        leading = len(messages) - len(recent) - 1
        origins = sources(self.backend.profile, self.summary, leading, len(recent))
        tokens = (*(self.message_tokens(m) for m in messages[:leading]), *self._history_counts[start : current + 1])
        return PreparedContext(self.request_instructions(), messages, origins, tokens, self._input_tokens(messages, tokens), spent, folded)

    def _input_tokens(self, messages: tuple[Message, ...], tokens: tuple[int, ...]) -> int:
        """``count_input_tokens``, from the counts just made when counting is local (it adds them the same way)."""
        if not isinstance(self.token_counter, LocalTokenCounter):
            return self.count_input_tokens(messages)
        instructions = self.request_instructions()
        return REPLY_PRIMING_TOKENS + sum(tokens) + (count_message("system", instructions) if instructions else 0)

    def _record(self, record: UsageRecord, texts: Sequence[str] = ()) -> None:
        """Appends ``record``; a trusted figure the server counted itself (not one it may have estimated, nor
        one its tokenizer's own count contradicts) teaches the calibration, by the kinds of ``texts``."""
        if record.trusted and record.teaches and record.server_counted_input_tokens is None and record.input_tokens is not None:
            self._learn(record.counted_input_tokens, record.input_tokens, texts)
        self.ledger.append(record)

    def check_limits(self, user_text: str) -> None:
        """Raises ValueError for a blank message, LimitReached when a session cap refuses it."""
        if not user_text.strip():
            raise ValueError("The message is empty.")
        self.limits.check(user_text, len(self.history) // 2, self.session_total_tokens)

    def _check_message_alone(self, message_tokens: int, text: str | None = None) -> None:
        """Raises ContextBudgetError when the message with the instructions alone is over the budget: by the
        server's own count where it has one (the margin may be pessimistic), else by the planned ratio."""
        if (alone := self._sizes().fixed + message_tokens) <= self.local_budget():
            return
        exact = None if text is None else self._exact(self.system_prompt, [Message("user", text)])
        if exact is not None and exact <= self.budget_in_force():
            return
        raise self._budget_error(alone + self._sizes().summary(self.summary), exact)

    def _budget_error(self, local_tokens: int, exact: int | None = None) -> ContextBudgetError:
        return ContextBudgetError(exact if exact is not None else self.calibration.server_estimate(local_tokens), self.budget_in_force())

    def _sizes(self) -> Sizes:
        """The request sizes under the summary cap, ``max_summary_tokens`` under either fold policy (chosen by
        measurement: README, "Cost against retention"), whose word limit the summary instructions ask for (``prompts.with_summary_cap``)."""
        cap = self.max_summary_tokens
        return request_sizes(self.model, self.system_prompt, with_summary_cap(self.summary_instructions, cap), cap)

    def _fold_room(self) -> int:
        return self._sizes().fold_room(self.local_budget())
