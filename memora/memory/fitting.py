"""The work behind ``ShortTermMemory.prepare`` and ``prefold``, read in this order: ``prepare`` asks the pure plan
(``plan.plan_turn``, through ``plan_now``) what must leave, folds it (``fold_through``, one ``summarize`` request
per piece of the plan), builds the context (``context_from``) and has the server count it where it can
(``counted``); when that count disagrees with the local plan, it asks the plan again with one more pair to leave.
``prefold`` carries out the same plan made between turns, for the message the policy expects next.

Each function takes the memory and uses only its public members (``Memory``): the state stays in the memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar

from memora.memory import plan as budget
from memora.memory import policies
from memora.memory.backend import Backend, BackendError, ContextOverflowError
from memora.memory.hook import OnChange
from memora.memory.limits import SessionLimits
from memora.memory.plan import History, PlanSizes, Sizes, TurnPlan, local_input_tokens, plan_turn, sources, summary_tokens
from memora.memory.summarizer import Summarizer, check_summary, summary_texts
from memora.memory.values import FoldPolicy, PreparedContext, SummaryVersion
from memora.messages import Message
from memora.tokens import LocalTokenCounter, TokenCounter
from memora.tokens.calibration import Calibration, request_kinds
from memora.tokens.usage import Ledger, UsageRecord

T = TypeVar("T")


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
    last_plan: TurnPlan | None
    last_fold_plan: TurnPlan | None
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
    """This turn's context, folding into the summary what the plan says must leave (``ShortTermMemory.prepare``).

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
    plan = kept_plan(memory, plan_now(memory, history.counts[current]), history.messages[current].content)
    while True:
        fold_through(memory, plan)
        start = memory.conversation.folded
        spent = sum(v.tokens for v in memory.conversation.versions[versions:])
        prepared = counted(memory, context_from(memory, start, current, spent, start - pointer))
        exact = prepared.server_input_tokens
        if (prepared.input_tokens <= memory.local_budget()) if exact is None else (exact <= memory.budget_in_force()):
            return prepared
        if start == current:
            raise budget.budget_error(memory.calibration, prepared.input_tokens, exact, memory.budget_in_force())
        # The server's count (or the API's) disagreed with the local plan: one more pair leaves.
        plan = kept_plan(memory, plan_now(memory, history.counts[current], at_least=2))


def plan_now(memory: Memory, message: int | None, at_least: int = 0) -> TurnPlan:
    """``plan.plan_turn`` for the memory as it is now: for a message of ``message`` tokens (the pending one), or for
    the message a fold ahead expects (None)."""
    history, sizes, budget_now = memory.conversation, memory.sizes(), memory.local_budget()
    end = len(history.messages) - history.pending
    return plan_turn(
        history.unfolded(end), message=message, summary=summary_tokens(memory.summary),
        sizes=PlanSizes(sizes.fixed, sizes.full_summary, sizes.fold_room(budget_now), budget_now),
        policy=policies.POLICIES[memory.fold_policy], max_recent_turns=memory.max_recent_turns, at_least=at_least,
    )  # fmt: skip


def kept_plan(memory: Memory, plan: TurnPlan, text: str | None) -> TurnPlan:
    """``plan``, kept as ``last_plan`` (and ``last_fold_plan`` when it folds), once its message is known to fit beside
    the instructions: by the plan, or else by the server's own count where it has one (the margin may be pessimistic).
    Raises ContextBudgetError when it does not. ``text`` None: the message is the one a fold ahead expects."""
    if not plan.message_fits:
        exact = None if text is None else exact_count(memory, memory.system_prompt, [Message("user", text)])
        if exact is None or exact > memory.budget_in_force():
            local = plan.alone + summary_tokens(memory.summary)
            raise budget.budget_error(memory.calibration, local, exact, memory.budget_in_force())
    if text is not None:
        memory.last_plan = plan
        if plan.fold:
            memory.last_fold_plan = plan
    return plan


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


def fold_through(memory: Memory, plan: TurnPlan) -> None:
    """Folds what ``plan`` folds, one summary request per piece; each request moves summary and pointer together,
    and a failure keeps the pieces before it."""
    start = memory.conversation.folded
    for pairs in plan.pieces:
        memory.fold(memory.conversation.messages[start : start + 2 * pairs], (start, start + 2 * pairs))
        start += 2 * pairs


def check_new_message(memory: Memory, user_text: str) -> None:
    """Refuses, before anything is kept or sent, a message no turn could take: ValueError for a blank one,
    LimitReached when a session cap refuses it (the character cap first, so that a pasted book is never tokenized),
    then ContextBudgetError when it is over the budget with the instructions alone (``kept_plan``)."""
    check_caps(memory, user_text)
    memory.calibration = memory.calibration.seeing([user_text])
    message = memory.message_tokens(Message("user", user_text))
    sizes = memory.sizes()
    if sizes.fixed + message > memory.local_budget():
        exact = exact_count(memory, memory.system_prompt, [Message("user", user_text)])
        if exact is None or exact > memory.budget_in_force():
            local = sizes.fixed + message + summary_tokens(memory.summary)
            raise budget.budget_error(memory.calibration, local, exact, memory.budget_in_force())


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
        return Summarizer(sizes.model, sizes.summary_instructions, sizes.max_summary_tokens).fold(
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

    return retry_on_overflow(send, learn, memory.window_too_small)


def prefold_plan(memory: Memory) -> TurnPlan:
    """The plan of a fold ahead: what a prefold folds now, planned for the message expected next. Makes no request.
    Raises ValueError while a user message is pending, and ContextBudgetError when even the expected message cannot
    fit beside the instructions."""
    if memory.conversation.pending:
        raise ValueError("A user message is pending; its prepare() does the folding.")
    return kept_plan(memory, plan_now(memory, None), None)


def prefold(memory: Memory) -> SummaryVersion | None:
    """Folds now what the next turn is certain to fold, so that its reply waits for no summary (``prefold_plan``).

    None (no request) when nothing is due. Raises LimitReached, sending nothing, when a session cap would refuse the
    next turn; a failed request leaves the memory as it was. Holds the memory's lock.
    """
    with memory.lock:
        plan = prefold_plan(memory)
        if not plan.fold:
            return None
        # A summary request is a request like any other: the caps that would refuse the next turn refuse it too.
        memory.limits.check_spend(len(memory.conversation.messages) // 2, memory.session_total_tokens)
        fold_through(memory, plan)
        memory.last_fold_plan = plan  # only once something was folded: the Status panel says why
        return memory.conversation.versions[-1]


def retry_on_overflow(send: Callable[[], T], learn: Callable[[ContextOverflowError], None], too_small: Callable[[], bool]) -> T:
    """``send()``; after a context-overflow error, ``learn``s its figures and sends once more, cut to the room they
    leave. Raises ``overflow_error()`` when ``too_small()`` after learning, or on a second overflow."""
    try:
        return send()
    except ContextOverflowError as overflow:
        learn(overflow)
    if too_small():
        raise overflow_error()
    try:
        return send()
    except ContextOverflowError:
        raise overflow_error() from None


def overflow_error() -> BackendError:
    """The error for a server whose context window no fold or cut can fit: only a setting can."""
    return BackendError(
        "The model server's context window is smaller than Memora's budget, even after folding and cutting to the "
        "figures it gave. Lower MEMORA_MAX_INPUT_TOKENS or set MEMORA_CONTEXT_WINDOW to the server's context size "
        "(llama.cpp: --n_ctx). Your message is kept."
    )


def check_caps(memory: Memory, user_text: str) -> None:
    """Raises ValueError for a blank message, LimitReached when a session cap refuses it (the character cap first,
    so that a pasted book is never tokenized)."""
    if not user_text.strip():
        raise ValueError("The message is empty.")
    memory.limits.check(user_text, len(memory.conversation.messages) // 2, memory.session_total_tokens)
