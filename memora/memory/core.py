"""ShortTermMemory, the article's class: one conversation's state, and the requests that change it.

Follow a turn: ``memory.turn(text)`` appends the message and yields a ``Turn``, whose ``stream()``
calls ``_prepare``: one plain loop, ``fold_until_it_fits``, over the turn's steps
(``PreparingTurn``), asks the one pure plan (``plan.plan_turn``) what must leave and folds it
(``_fold``: one summary request each, ``server.Summarizer``) until the plan folds nothing or the
server's count agrees; then the turn sends the context
and commits the reply (``finish_turn``), or the turn leaves no trace. Between turns, ``prefold``
carries out the plan made for the message expected next. Everything that decides is pure and lives
in ``plan``; this class keeps the state and does the I/O, and nothing else writes that state: the
``conversation`` (a ``History``), the ``ledger`` (``memora.text.usage``), the ``server``
(``server.ServerKnowledge``: the backend, and what its own counts teach) and the ``limits``
(``values.Limits``: the budget, the window, the policy and the classroom's caps, a ``hook.Caps`` the
app installs). ``configure`` changes them, and installs the saver's hook (``hook.OnChange``). The
article's Memora v0.7 names close the class, so that the article's main loop runs unchanged; the
figures the page reads (``budget_in_force``, ``local_budget``...) are functions after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import Any, Protocol

from memora.memory import budgets, layout, plan, policies, server
from memora.memory.backend import (
    Backend,
    BackendError,
    Completion,
    ContextOverflowError,
    ReplyRequest,
    backend_of,
)
from memora.memory.hook import Caps, OnChange
from memora.memory.plan import History, PlanSizes, Sizes, TurnPlan
from memora.memory.server import ServerKnowledge, Summarizer, check_summary, summary_texts
from memora.memory.values import (
    DEFAULT_MODEL,
    MAX_INPUT_TOKENS,
    MAX_RECENT_TURNS,
    MAX_REPLY_TOKENS,
    MAX_SUMMARY_TOKENS,
    FoldPolicy,
    Limits,
    PreparedContext,
    SummaryVersion,
    TurnStats,
)
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INSTRUCTIONS, SYSTEM_PROMPT, with_summary_cap
from memora.text.tokens import LocalTokenCounter, TextTokens
from memora.text.usage import Ledger, RequestParts, Usage, UsageRecord


class ShortTermMemory:
    """One conversation's ``conversation`` (a ``History``), ``ledger``, ``server`` and ``limits``
    (``values.Limits`` says what each argument is), and the requests that change them. ``lock``: one
    turn at a time per session.

    ``client`` is what the article passes, ``openai.OpenAI()``: any ``openai.OpenAI`` or
    OpenAI-compatible client (one with ``responses.create``), sent to through the Responses API in
    the article's layout. A memora backend (``memora.backends``) is taken as it is. The memory
    imports no SDK: it recognises a client through the adapters a part above registers
    (``memora.memory.backend.backend_of``); ``from memora import ShortTermMemory`` registers the
    OpenAI one. Raises TypeError for anything else."""

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_MODEL,
        system_prompt: str = SYSTEM_PROMPT,
        summary_instructions: str = SUMMARY_INSTRUCTIONS,
        max_input_tokens: int = MAX_INPUT_TOKENS,
        max_recent_turns: int = MAX_RECENT_TURNS,
        *,
        max_summary_tokens: int = MAX_SUMMARY_TOKENS,
        caps: Caps | None = None,
        max_reply_tokens: int | None = MAX_REPLY_TOKENS,
        context_window: int | None = None,
        fold_policy: FoldPolicy = policies.DEFAULT,
    ) -> None:
        self.system_prompt = system_prompt
        self.summary_instructions = summary_instructions
        self.lock = threading.RLock()
        self.limits = Limits(
            max_input_tokens,
            max_recent_turns,
            policies.DEFAULT,
            max_summary_tokens,
            max_reply_tokens,
            context_window,
            caps,
        )
        self.server = ServerKnowledge(backend_of(client), model, self.limits.output)
        self._on_change: OnChange | None = None
        self.restore()
        self.configure(fold_policy=fold_policy)  # checks the limits

    def __getstate__(self) -> dict[str, Any]:
        """The state without the lock (it cannot be copied) and the saver's hook (a copy is not
        what it saves)."""
        return {
            name: value for name, value in vars(self).items() if name not in ("lock", "_on_change")
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state, lock=threading.RLock(), _on_change=None)

    def restore(
        self,
        history: Sequence[Message] = (),
        summary_versions: Sequence[SummaryVersion] = (),
        ledger: Sequence[UsageRecord] = (),
        last_context: Sequence[Message] = (),
        last_request: PreparedContext | None = None,
    ) -> None:
        """Replaces the conversation's state at once (an empty one by default). The caller validates
        it. ``last_request``: the last reply request as it was prepared, for the page to draw again
        (None: not known)."""
        self._tokens = TextTokens()  # each message and summary tokenized once (see TextTokens)
        self.conversation = History(
            tuple(history), tuple(map(self._message_tokens, history)), tuple(summary_versions)
        )
        self.server.see([*(m.content for m in history), self.summary])
        self.ledger = Ledger(ledger)
        self.last_context = list(last_context)
        self.last_prepared: PreparedContext | None = last_request

    def configure(
        self,
        *,
        max_input_tokens: int | None = None,
        max_recent_turns: int | None = None,
        fold_policy: FoldPolicy | None = None,
        backend: Backend | None = None,
        model: str | None = None,
        on_change: OnChange | None = None,
    ) -> None:
        """Changes, from the next request, the budget, the window or the fold policy (a ValueError
        changes nothing); the backend and model (the new server's count is learned afresh); and the
        saver's hook (``hook.OnChange``)."""
        changes = {
            "max_input_tokens": max_input_tokens,
            "max_recent_turns": max_recent_turns,
            "fold_policy": fold_policy and policies.policy(fold_policy).name,
        }
        limits = replace(
            self.limits, **{name: value for name, value in changes.items() if value is not None}
        )
        plan.check_limits(
            limits.max_input_tokens,
            limits.max_recent_turns,
            minimum_budget(self),
            limits.output,
            limits.context_window,
        )
        self.limits = limits
        self._on_change = on_change or self._on_change
        if backend is not None:
            self.server = ServerKnowledge(backend, model or self.model, limits.output)

    # -- a turn: the plan, its folds, the request, the commit --------------------------------------

    def turn(self, user_text: str) -> AbstractContextManager[Turn]:
        """One user turn that completes or leaves no trace in the history (see ``transaction``)."""
        return transaction(self, user_text)

    def plan(self, user_text: str | None = None) -> TurnPlan:
        """What a turn with ``user_text`` would fold and send now; None: what the fold ahead folds
        between turns. Raises ValueError (blank, or None while a message is pending), LimitReached
        (a cap) or ContextBudgetError (too big)."""
        if user_text is None:
            if self.conversation.pending:
                raise ValueError("A user message is pending; its turn does the folding.")
            return self._checked(self._plan(None), None)
        check_caps(self, user_text)
        self.server.see([user_text])
        message = self._message_tokens(Message("user", user_text))
        return self._checked(self._plan(message), user_text)

    def _prepare(self) -> PreparedContext:
        """This turn's request, once the plan's folds are made: the article's steps, one plain loop
        (``fold_until_it_fits``) over this turn's ``PreparingTurn``. Raises ValueError without
        a pending user message, and ContextBudgetError when even the summary plus the message do
        not fit, by the server's count where it has one."""
        history = self.conversation
        if not history.pending:
            if history.messages:
                raise ValueError(
                    "The last message must be a user message before building the context."
                )
            raise ValueError("The conversation history is empty.")
        current = len(history.messages) - 1
        self._checked(self._plan(history.counts[current]), history.messages[current].content)
        turn = PreparingTurn(self, current)
        fits = fold_until_it_fits(turn)
        prepared = turn.built
        assert prepared is not None  # the loop builds before it answers
        if not fits:
            raise budgets.budget_error(
                self.server.calibration,
                prepared.input_tokens,
                prepared.server_input_tokens,
                budget_in_force(self),
            )
        self.last_prepared = prepared
        return prepared

    def prefold(self) -> SummaryVersion | None:
        """Folds now what the next turn is certain to fold, so that its reply waits for no summary;
        None when nothing is due. Raises LimitReached, sending nothing, when a session cap would
        refuse the next turn. Holds the lock."""
        with self.lock:
            ahead = self.plan()
            if not ahead.fold:
                return None
            # A summary request is a request like any other: the caps that would refuse the next
            # turn refuse it too.
            if self.limits.caps is not None:
                self.limits.caps.check_spend(
                    len(self.conversation.messages) // 2, self.session_total_tokens
                )
            for span in ahead.spans(self.summarized_message_count):
                self._fold(self.conversation.messages[slice(*span)], span, ahead)
            return self.conversation.versions[-1]

    def _fold(
        self, messages: tuple[Message, ...], span: tuple[int, int], fold_plan: TurnPlan | None
    ) -> SummaryVersion:
        """One summary request folding ``messages`` (history ``span``) as ``fold_plan`` planned,
        recorded in the ledger. Raises BackendError (nothing changes), and SummaryError (after the
        record) for an empty summary."""
        sizes = request_sizes(self)
        cap = self.limits.max_summary_tokens
        summarizer = Summarizer(self.model, sizes.summary_instructions, cap)
        version, record = summarizer.summarize(
            self.server,
            self.summary,
            messages,
            span,
            sizes=sizes,
            turn=self.conversation.turn_number,
            message_tokens=tuple(map(self._message_tokens, messages)),
            served_by=served_by(self),
            max_input_tokens=self.max_input_tokens,
            plan_texts=plan_texts(self),
            version=len(self.conversation.versions) + 1,
            reason="none" if fold_plan is None else fold_plan.reason,
        )
        self.server.record(self.ledger, record, summary_texts(self.summary, messages))
        self.server.see([version.text])
        check_summary(version, messages)
        self.conversation = self.conversation.folding(version, fold_plan)
        if self._on_change is not None:
            self._on_change(self, "fold")
        return version

    def finish_turn(
        self,
        assistant_reply: str,
        context_messages: Sequence[Message],
        response_tokens: int,
        *,
        usage: Usage | None = None,
        latency_s: float = 0.0,
        cut: bool = False,
    ) -> TurnStats:
        """Completes the pending turn with ``assistant_reply``; records the request
        (``reply_record``); returns its stats. ``cut``: the reply stopped at its cap (kept, and
        marked). Raises ValueError when no user message is pending."""
        if not self.conversation.pending:
            raise ValueError("There is no pending user message to reply to.")
        record = reply_record(
            self, context_messages, response_tokens, usage, latency_s=latency_s, cut=cut
        )
        self.server.record(
            self.ledger,
            record,
            [request_instructions(self), *(m.content for m in context_messages)],
        )
        self._add_message(Message("assistant", assistant_reply))
        self.last_context = list(context_messages)
        if self._on_change is not None:
            self._on_change(self, "turn")
        return TurnStats(record, self.session_total_tokens)

    def _plan(self, message: int | None, at_least: int = 0) -> TurnPlan:
        """``plan.plan_turn`` for the memory as it is: a message of ``message`` tokens (None: the
        one a fold ahead expects), folding at least ``at_least`` messages."""
        history = self.conversation
        sizes = request_sizes(self)
        budget = local_budget(self)
        profile = self.server.backend.profile
        return plan.plan_turn(
            history.unfolded(history.finished),
            message=message,
            summary=layout.summary_in_request(profile, self.system_prompt, self.summary),
            sizes=PlanSizes(sizes.fixed, sizes.full_summary, sizes.fold_room(budget), budget),
            policy=policies.POLICIES[self.limits.fold_policy],
            max_recent_turns=self.max_recent_turns,
            at_least=at_least,
        )

    def _checked(self, turn_plan: TurnPlan, text: str | None) -> TurnPlan:
        """``turn_plan``, once its message is known to fit beside the instructions
        (``ServerKnowledge.check_alone``: by the plan, else by the server's count of ``text``; None
        for the message a fold ahead expects). Raises ContextBudgetError when it does not."""
        in_force = budget_in_force(self)
        self.server.check_alone(turn_plan, text, self.system_prompt, self.summary, in_force)
        return turn_plan

    def _add_message(self, message: Message) -> None:
        """Appends ``message``, its tokens counted once; the calibration sees its kind of text."""
        self.server.see([message.content])
        self.conversation = self.conversation.adding(message, self._message_tokens(message))

    def _message_tokens(self, message: Message) -> int:
        """The local tokens ``message`` adds to a request, its text tokenized once per
        conversation."""
        return self._tokens.message(message.role, message.content)

    # -- the article's API, name for name (``history`` is a copy: only the memory changes it) ------

    model = property(lambda self: self.server.model)
    max_input_tokens = property(lambda self: self.limits.max_input_tokens)
    max_recent_turns = property(lambda self: self.limits.max_recent_turns)
    history = property(lambda self: list(self.conversation.messages))
    summary = property(lambda self: self.conversation.summary)
    summarized_message_count = property(lambda self: self.conversation.folded)
    session_total_tokens = property(lambda self: self.ledger.total)

    def add_user_message(self, content: str) -> None:
        """Appends a user message. Raises ValueError if a user message is already pending."""
        if self.conversation.pending:
            raise ValueError(
                "A user message is already waiting for its reply; "
                "finish or roll back that turn first."
            )
        self._add_message(Message("user", content))
        self.last_prepared = None  # belongs to the previous turn

    def rollback_last_user_message(self) -> None:
        self.conversation = self.conversation.without_pending()

    def format_messages(self, messages: Sequence[Message]) -> str:
        return "\n".join(f"{message['role']}: {message['content']}" for message in messages)

    def count_input_tokens(self, messages: Sequence[Message]) -> int:
        """A reply request's input tokens with ``messages``: the server's count where it counts
        requests, else the local one."""
        instructions = request_instructions(self)
        exact = self.server.exact(instructions, messages)
        return (
            LocalTokenCounter().count(self.model, instructions, messages)
            if exact is None
            else exact
        )

    def update_summary(self, new_messages: Sequence[Message]) -> int:
        """Merges ``new_messages`` into the summary without moving the pointer (nor a new plan);
        returns its tokens."""
        return self._fold(
            tuple(new_messages), (self.summarized_message_count,) * 2, self.conversation.fold_plan
        ).tokens

    def create_context_messages(
        self, recent_messages: Sequence[Message], current_user_message: Message
    ) -> list[Message]:
        """Summary, window and message, in the wire's roles (``layout.lead_messages``)."""
        lead = layout.lead_messages(self.server.backend.profile, self.system_prompt, self.summary)
        return [*lead, *recent_messages, current_user_message]

    def prepare_context(self) -> dict[str, Any]:
        return self._prepare().as_dict()

    def get_status(self) -> dict[str, int | bool]:
        return {
            "History messages": len(self.conversation.messages),
            "Summarized messages": self.summarized_message_count,
            "Last context messages": len(self.last_context),
            "Summary available": bool(self.summary),
            "Session total tokens": self.session_total_tokens,
        }


# -- figures of a memory, read-only (the page's Status panel reads them too) -----------------------


def budget_in_force(memory: ShortTermMemory) -> int:
    """The input budget in the server's tokens: ``max_input_tokens``, or less where the server's
    window leaves less."""
    server = memory.server
    return budgets.budget_in_force(memory.max_input_tokens, server.server_window, server.output)


def local_budget(memory: ShortTermMemory) -> int:
    """``budget_in_force`` in local tokens (``budgets.local_budget``, through
    ``ServerKnowledge.budgets``): where the server counts each request, weighed by the texts one may
    carry; else at the highest ratio of any kind of text."""
    return memory.server.budgets(memory.max_input_tokens, plan_texts(memory))[1]


def last_reply(memory: ShortTermMemory) -> UsageRecord | None:
    """The ledger's record of the newest reply request; None before any reply."""
    return next((record for record in reversed(memory.ledger) if record.kind == "reply"), None)


def last_sent(memory: ShortTermMemory) -> RequestParts | None:
    """The newest reply request as its ledger record keeps it, part by part; None before any reply
    (and for a record saved before records kept their parts)."""
    record = last_reply(memory)
    return None if record is None else record.parts


def request_instructions(memory: ShortTermMemory) -> str:
    """The instructions of a reply request, as the server's profile places them."""
    return layout.request_instructions(memory.server.backend.profile, memory.system_prompt)


def plan_texts(memory: ShortTermMemory) -> list[str]:
    """The texts a request of ``memory`` may carry: its instructions, its summary and its unfolded
    messages."""
    return [
        memory.system_prompt,
        memory.summary,
        *(m.content for m in memory.conversation.unfolded_messages),
    ]


def minimum_budget(memory: ShortTermMemory) -> int:
    """The smallest budget, in the server's tokens, for a reply and for a summary request."""
    return memory.server.calibration.server_estimate(request_sizes(memory).minimum_budget)


def request_sizes(memory: ShortTermMemory) -> Sizes:
    """The request sizes under the summary cap, whose word limit the summary instructions ask
    for."""
    cap = memory.limits.max_summary_tokens
    return plan.request_sizes(
        memory.model, memory.system_prompt, with_summary_cap(memory.summary_instructions, cap), cap
    )


def full_history_tokens(memory: ShortTermMemory) -> int:
    """What one request with every message in history would cost, instructions included
    (``plan.request_tokens`` with no summary: the history as its window)."""
    return plan.request_tokens(request_sizes(memory).fixed, 0, memory.conversation.counts, 0)


def check_caps(memory: ShortTermMemory, user_text: str) -> None:
    """Raises ValueError for a blank message, and the caps' error (LimitReached) when a session cap
    refuses it, before the message is tokenized: a pasted book is refused by its characters."""
    if not user_text.strip():
        raise ValueError("The message is empty.")
    if memory.limits.caps is not None:
        memory.limits.caps.check(
            user_text, len(memory.conversation.messages) // 2, memory.session_total_tokens
        )


def served_by(memory: ShortTermMemory) -> str:
    """The model the ledger names for a request of ``memory``: ``offline`` for the offline
    engine."""
    return "offline" if memory.server.backend.offline else memory.model


# -- a turn's folds, then its request: the memory's and the replay's one loop ----------------------


ONE_MORE_PAIR = 2
"""``at_least`` once the server's own count of a request is over the budget: one more pair
leaves."""


class TurnSteps(Protocol):
    """What a turn's loop (``fold_until_it_fits``) asks of whoever takes its steps: the memory, with
    real requests (``core``), or a replay, with their counts (``memora.teaching.replay``)."""

    def plan(self, at_least: int) -> TurnPlan:
        """The plan for the conversation as it is now (``plan_turn``), folding at least
        ``at_least`` messages."""
        ...

    def fold(self, turn_plan: TurnPlan) -> None:
        """Makes the summary requests ``turn_plan`` asks for, one per span (``TurnPlan.spans``),
        oldest first."""
        ...

    def build(self, turn_plan: TurnPlan) -> bool | None:
        """Builds the request ``turn_plan`` counted, and keeps it; returns whether the server's own
        count of it holds the budget, or None where the server does not count requests."""
        ...


def fold_until_it_fits(steps: TurnSteps) -> bool:
    """A turn's folds, then its request: the article's steps, one plain loop for the memory and the
    replay alike. Returns whether the request built last fits the budget.

    1. Ask the plan what must leave (``plan_turn``).
    2. Fold it: one summary request per span, oldest first.
    3. Ask again, with the summary as written (the plan reserved a full-length one); repeat until
       the plan folds nothing. That plan counts the request exactly, and its ``fits`` is the budget
       inequality (``within_budget``): the rule is checked by the plan, and nowhere else.
    4. Build the request. Where the server counts each request itself, its count decides instead,
       and the plan only had to be close: over the budget by that count, one more pair leaves
       (``ONE_MORE_PAIR``) and the steps start again.

    False when the request does not fit and nothing is left to fold.
    """
    turn_plan = steps.plan(0)
    while True:
        while turn_plan.fold:
            steps.fold(turn_plan)
            turn_plan = steps.plan(0)
        server_fits = steps.build(turn_plan)
        if server_fits is None:
            return turn_plan.fits  # the plan folded everything it had to: its verdict stands
        if server_fits:
            return True
        turn_plan = steps.plan(ONE_MORE_PAIR)
        if not turn_plan.fold:
            return False  # nothing is left to fold


# -- one turn: prepare, stream, commit or leave no trace -------------------------------------------


class PreparingTurn:
    """The memory's steps for one turn's loop (``TurnSteps``): plan, fold with real summary
    requests, build the reply request for history message ``current``, which it keeps as
    ``built``. What this turn's folds spent and folded is counted from where the turn began."""

    def __init__(self, memory: ShortTermMemory, current: int) -> None:
        self.memory = memory
        self.current = current
        self.message = memory.conversation.counts[current]
        self.versions_before = len(memory.conversation.versions)
        self.folded_before = memory.conversation.folded
        self.built: PreparedContext | None = None

    def plan(self, at_least: int) -> TurnPlan:
        return self.memory._plan(self.message, at_least)

    def fold(self, turn_plan: TurnPlan) -> None:
        memory = self.memory
        for span in turn_plan.spans(memory.conversation.folded):
            memory._fold(memory.conversation.messages[slice(*span)], span, turn_plan)

    def build(self, turn_plan: TurnPlan) -> bool | None:
        """Builds the request as the memory stands, counted by the server where it counts requests;
        None where it does not (the plan's verdict stands)."""
        memory = self.memory
        history = memory.conversation
        context = layout.context(
            history,
            memory.server.backend.profile,
            memory.system_prompt,
            current=self.current,
            budget=local_budget(memory),
            summary_token_usage=sum(v.tokens for v in history.versions[self.versions_before :]),
            newly_summarized_count=history.folded - self.folded_before,
        )
        self.built = memory.server.counted(context)
        exact = self.built.server_input_tokens
        return None if exact is None else plan.within_budget(exact, budget_in_force(memory))


@contextmanager
def transaction(memory: ShortTermMemory, user_text: str) -> Iterator[Turn]:
    """``memory.turn(user_text)``: one user turn that completes or leaves no trace in the history.

    Appends the message and yields a ``Turn``; unless its reply was committed,
    removes the message on leaving, after any exception (BaseException too:
    Streamlit's stop and rerun) or an abandoned stream. ``turn.user_text`` keeps
    the text; summaries folded before a failure stay folded. Raises ValueError
    (LimitReached for a session cap) before appending anything. The memory's lock
    is held throughout, so another thread of the same session waits for the rollback.
    """
    check_caps(memory, user_text)
    with memory.lock:
        memory.add_user_message(user_text)
        active = Turn(memory, user_text)
        try:
            yield active
        finally:
            if not active.committed:
                memory.rollback_last_user_message()


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

        A context-overflow error (the server's window is smaller than planned for) never
        reaches the caller as it is: the memory learns its figures, prepares the context
        again (folding or cutting to fit them) and sends it once more; a second overflow
        raises a BackendError that says which setting to change, not to resend.
        """
        memory = self.memory
        for attempt in range(2):
            self.prepared = prepared = memory._prepare()
            request = ReplyRequest(
                model=memory.model,
                instructions=prepared.instructions,
                messages=prepared.context_messages,
                counted_input_tokens=prepared.input_tokens,
                input_budget=budget_in_force(memory),
                max_output_tokens=memory.limits.max_reply_tokens,
            )
            began = time.perf_counter()
            try:
                for item in memory.server.backend.stream_reply(request):
                    if isinstance(item, Completion):
                        self._commit(item, began)
                        return
                    yield item
            except ContextOverflowError as overflow:
                # The server refuses before its first token, so nothing was yielded for this
                # attempt.
                if attempt:
                    raise server.overflow_error() from None
                memory.server.learn_overflow(overflow, prepared.input_tokens, prepared.texts)
                if memory.server.too_small():
                    raise server.overflow_error() from None
                continue
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


def reply_record(
    memory: ShortTermMemory,
    context_messages: Sequence[Message],
    response_tokens: int,
    usage: Usage | None,
    *,
    latency_s: float,
    cut: bool,
) -> UsageRecord:
    """The ledger's record of the pending turn's reply request, sent with ``context_messages``: what
    ``_prepare`` planned for it (nothing when the article's loop sent a context of its own, then
    counted here). ``cut``: the reply stopped at its cap. Without ``usage`` (the article's
    ``finish_turn``) the record has only ``response_tokens``, as the total."""
    prepared = memory.last_prepared
    fields = {
        "turn": memory.conversation.turn_number,
        "kind": "reply",
        "model": served_by(memory),
        "latency_s": latency_s,
        "cut": cut,
        "counted_input_tokens": prepared.input_tokens
        if prepared
        else memory.count_input_tokens(context_messages),
        "full_history_tokens": full_history_tokens(memory),
        "input_budget": budget_in_force(memory),
        "context_messages": len(context_messages),
        "newly_summarized": prepared.newly_summarized_count if prepared else 0,
        "summary_tokens": prepared.summary_token_usage if prepared else 0,
        "server_counted_input_tokens": prepared.server_input_tokens if prepared else None,
        "parts": prepared.parts if prepared else None,
    }
    if usage is None:
        return UsageRecord(
            **fields, input_tokens=None, output_tokens=None, total_tokens=response_tokens
        )
    return UsageRecord.of(**fields, usage=usage)
