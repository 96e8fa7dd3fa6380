"""Fitting each request to the budget: the plan, the folds it calls for, the server's own count, folding ahead.

This is the work behind ``ShortTermMemory.prepare``, ``fold_through`` and ``prefold``, read in this order:
``prepare`` asks ``plan`` (the article's rule, ``planner.plan_context``, or the watermark) what must leave,
folds it (``fold_through``, one ``summarize`` request per piece), builds the context (``context_from``) and
has the server count it where it can (``counted``); when that count disagrees with the local plan, one more
pair leaves. ``prefold_plan`` is the same plan made between turns, for the message expected next.

Each function takes the memory and uses only its public members (``Memory``): the state stays in the memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from memora.backends import Backend
from memora.backends.openai_errors import ContextOverflowError
from memora.memory import budget
from memora.memory.context import local_input_tokens, sources
from memora.memory.history import History
from memora.memory.hook import OnChange
from memora.memory.limits import SessionLimits
from memora.memory.planner import Plan, plan_folds
from memora.memory.prefold import expected_message
from memora.memory.prefold import prefold_plan as plan_ahead
from memora.memory.sizes import Sizes
from memora.memory.summarizer import check_summary, fold_pieces, summary_texts
from memora.memory.turn import check_limits
from memora.memory.values import FoldPolicy, PreparedContext, SummaryVersion
from memora.messages import Message
from memora.prompts import SUMMARY_PREAMBLE
from memora.tokens import LocalTokenCounter, TokenCounter
from memora.tokens.calibration import Calibration, request_kinds
from memora.tokens.usage import Ledger, UsageRecord


class Memory(Protocol):
    """The members of ``ShortTermMemory`` that fitting a request reads and calls."""

    conversation: History
    calibration: Calibration
    backend: Backend
    model: str
    system_prompt: str
    token_counter: TokenCounter
    fold_policy: FoldPolicy
    max_recent_turns: int
    fold_batch_turns: int
    last_plan: Plan | None
    last_fold_plan: Plan | None
    limits: SessionLimits
    ledger: Ledger
    on_change: OnChange | None
    lock: AbstractContextManager[Any]

    @property
    def summary(self) -> str: ...
    @property
    def served_by(self) -> str: ...
    @property
    def session_total_tokens(self) -> int: ...

    def sizes(self) -> Sizes: ...
    def local_budget(self) -> int: ...
    def budget_in_force(self) -> int: ...
    def window_too_small(self) -> bool: ...
    def learn_overflow(self, overflow: ContextOverflowError, local: int, texts: Sequence[str]) -> None: ...
    def message_tokens(self, message: Message) -> int: ...
    def fold(self, messages: tuple[Message, ...], span: tuple[int, int]) -> SummaryVersion: ...
    def create_context_messages(self, recent: Sequence[Message], current: Message) -> list[Message]: ...
    def request_instructions(self) -> str: ...
    def count_input_tokens(self, messages: Sequence[Message]) -> int: ...


def prepare(memory: Memory) -> PreparedContext:
    """This turn's context, folding into the summary what ``plan`` says must leave (``ShortTermMemory.prepare``).

    Raises ValueError without a pending user message, and ContextBudgetError when even the summary plus the
    message do not fit, by the server's count where it has one, else by the local plan.
    """
    history = memory.conversation
    if not history.pending:
        raise ValueError(
            "The last message must be a user message before building the context."
            if history.messages
            else "The conversation history is empty."
        )
    current, versions, pointer = len(history.messages) - 1, len(history.versions), history.folded
    for start in range(pointer + plan(memory, current, history.counts[current]).fold, current + 1, 2):
        if start > memory.conversation.folded:
            fold_through(memory, start)
        spent = sum(v.tokens for v in memory.conversation.versions[versions:])
        prepared = counted(memory, context_from(memory, start, current, spent, start - pointer))
        exact = prepared.server_input_tokens
        if (prepared.input_tokens <= memory.local_budget()) if exact is None else (exact <= memory.budget_in_force()):
            return prepared
        # The server's count (or the API's) disagreed with the local plan: one more pair leaves.
    raise budget.budget_error(memory.calibration, prepared.input_tokens, exact, memory.budget_in_force())


def plan(memory: Memory, current: int, message_tokens: int) -> Plan:
    """The fold policy's plan for a message of ``message_tokens`` at history index ``current``, kept as ``last_plan``
    (and ``last_fold_plan`` when it folds). Raises ContextBudgetError for a message too big even alone."""
    check_message_alone(memory, message_tokens, memory.conversation.messages[current].content)
    memory.last_plan = plan_for(memory, memory.conversation.unfolded(current), message_tokens)
    if memory.last_plan.fold:
        memory.last_fold_plan = memory.last_plan
    return memory.last_plan


def plan_for(memory: Memory, unfolded: Sequence[int], message_tokens: int) -> Plan:
    """``planner.plan_folds`` for ``unfolded`` messages and a message of ``message_tokens``, with the memory's sizes."""
    sizes = memory.sizes()
    return plan_folds(
        memory.fold_policy, unfolded, message=message_tokens, fixed=sizes.fixed, summary=summary_tokens(memory),
        full_summary=sizes.full_summary, budget=memory.local_budget(), max_recent_turns=memory.max_recent_turns,
        fold_batch_turns=memory.fold_batch_turns,
    )  # fmt: skip


def summary_tokens(memory: Memory) -> int:
    """``Sizes.summary`` of the memory's summary, tokenized once per summary (with the conversation's texts)."""
    return memory.message_tokens(Message("developer", SUMMARY_PREAMBLE + memory.summary)) if memory.summary else 0


def check_message_alone(memory: Memory, message_tokens: int, text: str | None = None) -> None:
    """Raises ContextBudgetError when the message with the instructions alone is over the budget: by the server's own
    count where it has one (the margin may be pessimistic), else by the planned ratio. ``text`` None: counts only."""
    sizes = memory.sizes()
    if (alone := sizes.fixed + message_tokens) <= memory.local_budget():
        return
    exact = None if text is None else exact_count(memory, memory.system_prompt, [Message("user", text)])
    if exact is None or exact > memory.budget_in_force():
        raise budget.budget_error(memory.calibration, alone + sizes.summary(memory.summary), exact, memory.budget_in_force())


def context_from(memory: Memory, start: int, current: int, spent: int, folded: int) -> PreparedContext:
    """The context with ``history[start:current]`` as its window and ``history[current]`` as its message; ``spent`` and
    ``folded`` are this turn's summary tokens and newly folded messages. Counted locally from the history's counts."""
    history = memory.conversation
    messages = tuple(memory.create_context_messages(history.messages[start:current], history.messages[current]))
    leading = len(messages) - (current - start) - 1
    tokens = (*map(memory.message_tokens, messages[:leading]), *history.counts[start : current + 1])
    instructions = memory.request_instructions()
    local = isinstance(memory.token_counter, LocalTokenCounter)
    input_tokens = local_input_tokens(instructions, tokens) if local else memory.count_input_tokens(messages)
    origins = sources(memory.backend.profile, memory.summary, leading, current - start)
    return PreparedContext(instructions, messages, origins, tokens, input_tokens, spent, folded)


def counted(memory: Memory, prepared: PreparedContext) -> PreparedContext:
    """``prepared`` with the server's own count of it, where it counts requests; that count teaches the calibration."""
    if (exact := exact_count(memory, prepared.instructions, prepared.context_messages)) is None:
        return prepared
    learn(memory, prepared.input_tokens, exact, [prepared.instructions, *(m.content for m in prepared.context_messages)])
    return replace(prepared, server_input_tokens=exact)


def fold_through(memory: Memory, end: int) -> SummaryVersion:
    """Folds ``history[folded:end]`` in as few summary requests as fit the budget (``fold_pieces``); each request moves
    summary and pointer together, and a failure keeps the pieces before it. Returns the last version.
    Raises ValueError unless ``end`` is even, past the folded messages and within the finished pairs."""
    start = memory.conversation.folded
    for count in fold_pieces(memory.conversation.pairs_through(end), memory.sizes().fold_room(memory.local_budget())):
        memory.fold(memory.conversation.messages[start : start + 2 * count], (start, start + 2 * count))
        start += 2 * count
    return memory.conversation.versions[-1]


def check_new_message(memory: Memory, user_text: str) -> None:
    """Refuses, before anything is kept or sent, a message no turn could take: ValueError for a blank one,
    LimitReached when a session cap refuses it (the character cap first, so that a pasted book is never tokenized),
    then ContextBudgetError when it is over the budget with the instructions alone (``check_message_alone``)."""
    check_limits(memory, user_text)
    memory.calibration = memory.calibration.seeing([user_text])
    check_message_alone(memory, memory.message_tokens(Message("user", user_text)), user_text)


def learn(memory: Memory, local: int, server: int, texts: Sequence[str]) -> None:
    """Teaches the calibration a count the server itself made (never a figure it estimated), by the kinds of ``texts``."""
    memory.calibration = memory.calibration.learn(local, server, request_kinds(local, texts))


def record_request(memory: Memory, record: UsageRecord, texts: Sequence[str] = ()) -> None:
    """Appends ``record`` to the ledger; a trusted figure the server counted itself (not one it may have estimated, nor
    one its tokenizer's own count contradicts) teaches the calibration, by the kinds of ``texts``."""
    if record.trusted and record.teaches and record.server_counted_input_tokens is None and record.input_tokens is not None:
        learn(memory, record.counted_input_tokens, record.input_tokens, texts)
    memory.ledger.append(record)


def exact_count(memory: Memory, instructions: str, messages: Sequence[Message]) -> int | None:
    """The server's own count of a request, template included; None where local counts must do."""
    count = budget.exact_counter(memory.backend, memory.calibration)
    return None if count is None else count(memory.model, instructions, messages)


def fold(memory: Memory, messages: tuple[Message, ...], span: tuple[int, int]) -> SummaryVersion:
    """One summary request folding ``messages`` (history ``span``) into the summary (``summarize``): its record goes in
    the ledger, its summary becomes the memory's new version, and ``on_change`` hears of it. Returns the version.
    Raises what ``summarize`` raises, and SummaryError, after the record, for an empty summary of new messages."""
    texts = summary_texts(memory.summary, messages)
    version, record = summarize(memory, messages, span, texts)
    record_request(memory, record, texts)
    memory.calibration = memory.calibration.seeing([version.text])
    check_summary(version, messages)
    memory.conversation = memory.conversation.folding(version)
    if memory.on_change is not None:
        memory.on_change(memory, "fold")
    return version


def summarize(
    memory: Memory, messages: tuple[Message, ...], span: tuple[int, int], texts: Sequence[str]
) -> tuple[SummaryVersion, UsageRecord]:
    """One summary request folding ``messages`` (history ``span``) into the summary (``Summarizer.fold``), held to the
    budget by the server's own count where it has one. A context-overflow error teaches its figures, and the request
    is cut to the room they leave and sent once more (``budget.retry_on_overflow``). Records nothing."""
    sizes = memory.sizes()

    def send() -> tuple[SummaryVersion, UsageRecord]:
        room, tokens = sizes.fold_room(memory.local_budget()), tuple(map(memory.message_tokens, messages))
        exact, turn = budget.exact_counter(memory.backend, memory.calibration), memory.conversation.turn_number
        return sizes.summarizer.fold(
            memory.backend,
            memory.summary,
            messages,
            span,
            room,
            message_tokens=tokens,
            turn=turn,
            served_by=memory.served_by,
            input_budget=memory.budget_in_force(),
            exact=exact,
            learn=partial(learn, memory),
        )

    def learn(overflow: ContextOverflowError) -> None:
        memory.learn_overflow(overflow, sizes.summary_request + sum(map(memory.message_tokens, messages)), texts)

    return budget.retry_on_overflow(send, learn, memory.window_too_small)


def prefold_plan(memory: Memory) -> tuple[int, Plan]:
    """The history index a prefold folds through now (the folded count when nothing is due), and the plan for the
    message expected next (``prefold``). Makes no request. Raises ValueError while a user message is pending, and
    ContextBudgetError when even the expected message cannot fit beside the instructions."""
    history = memory.conversation
    if history.pending:
        raise ValueError("A user message is pending; its prepare() does the folding.")
    unfolded = history.unfolded(len(history.messages))
    message = expected_message(memory.fold_policy, unfolded[::2])
    check_message_alone(memory, message)
    fold, expected = plan_ahead(
        memory.fold_policy, unfolded, message, lambda tokens: plan_for(memory, unfolded, tokens), memory.max_recent_turns
    )
    return history.folded + fold, expected


def prefold(memory: Memory) -> SummaryVersion | None:
    """Folds now what the next turn is certain to fold, so that its reply waits for no summary (``prefold_plan``).

    None (no request) when nothing is due. Raises LimitReached, sending nothing, when a session cap would refuse the
    next turn; a failed request leaves the memory as it was. Holds the memory's lock.
    """
    with memory.lock:
        end, expected = prefold_plan(memory)
        if end <= memory.conversation.folded:
            return None
        # A summary request is a request like any other: the caps that would refuse the next turn refuse it too.
        memory.limits.check_spend(len(memory.conversation.messages) // 2, memory.session_total_tokens)
        version = fold_through(memory, end)
        memory.last_fold_plan = expected  # only once something was folded: the Status panel says why
        return version
