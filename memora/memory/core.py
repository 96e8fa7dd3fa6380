"""ShortTermMemory: one conversation's history, summary and ledger, and what each request sends.

Follow a turn: ``memory.turn(text)`` (``turn``: append the message, stream the reply, commit or
leave no trace) calls ``prepare``, which ``fitting.prepare`` does: it asks the one pure plan (``plan.plan_turn``) what
must leave, and folds it through ``summarizer``. The history is a frozen
value (``history.History``); the budget in force and what the server's count teaches are ``budget``.
The state lives here; the work lives in those modules, which use only this class's public members.
The article's Memora v0.7 API closes the class, a thin face over the members above it, so that the
article's main loop runs unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from memora.memory import fitting, policies
from memora.memory import plan as budget
from memora.memory.backend import Backend, BackendError, Completion, ContextOverflowError, ReplyRequest
from memora.memory.hook import OnChange
from memora.memory.limits import SessionLimits
from memora.memory.plan import History, Sizes, TurnPlan, check_limits, lead_messages, request_instructions, request_sizes
from memora.memory.values import (
    DEFAULT_MODEL,
    MAX_INPUT_TOKENS,
    MAX_RECENT_TURNS,
    MAX_REPLY_TOKENS,
    MAX_SUMMARY_TOKENS,
    FoldPolicy,
    PreparedContext,
    SummaryVersion,
    TurnStats,
)
from memora.messages import Message
from memora.prompts import SUMMARY_INSTRUCTIONS, SYSTEM_PROMPT, with_summary_cap
from memora.tokens import LocalTokenCounter, TextTokens, TokenCounter
from memora.tokens.calibration import Calibration
from memora.tokens.usage import Ledger, Usage, UsageRecord


class ShortTermMemory:
    """The short-term memory of one conversation: its ``History`` (``conversation``), ledger and budget.

    ``client`` (the article's name): a memora backend, or the article's client that carries one (``ArticleClient``).
    Budgets are the server's tokens; plans count local o200k_base tokens against ``local_budget()``, which
    ``calibration`` learns (``budget``). ``fold_policy``: a registered policy's name (``policies``: ``window``, the
    article's, or ``watermark``); ``max_reply_tokens``: each reply's cap (None: none); ``context_window``: the
    server's, when known; ``limits``: the session's caps; ``lock``: one turn at a time per session;
    ``on_change(memory, change)`` (``hook``): called after each committed turn and fold.
    """

    on_change: OnChange | None = None

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
        limits: SessionLimits | None = None,
        max_reply_tokens: int | None = MAX_REPLY_TOKENS,
        context_window: int | None = None,
        fold_policy: FoldPolicy = "window",
    ) -> None:
        self.switch_backend(backend_of(client), model, token_counter)
        self.system_prompt, self.summary_instructions = system_prompt, summary_instructions
        self.max_summary_tokens, self.max_reply_tokens, self.context_window = max_summary_tokens, max_reply_tokens, context_window
        self.max_input_tokens, self.max_recent_turns = max_input_tokens, max_recent_turns
        self.limits, self.fold_policy = limits or SessionLimits(), policies.policy(fold_policy).name
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
        self._tokens = TextTokens()  # each message and summary tokenized once (see TextTokens)
        self.conversation = History(tuple(history), tuple(map(self.message_tokens, history)), tuple(summary_versions))
        self.calibration = self.calibration.seeing([*(m.content for m in history), self.summary])
        self.ledger, self.last_context = Ledger(ledger), list(last_context)
        self.last_prepared: PreparedContext | None = None
        self.last_plan: TurnPlan | None = None
        self.last_fold_plan: TurnPlan | None = None  # the plan of the last fold, for "why did it fold?"

    def update_limits(
        self, *, max_input_tokens: int | None = None, max_recent_turns: int | None = None, fold_policy: FoldPolicy | None = None
    ) -> None:
        """Changes the budget, the window or the fold policy from the next request; ValueError changes nothing (``check_limits``)."""
        limit = self.max_input_tokens if max_input_tokens is None else max_input_tokens
        recent = self.max_recent_turns if max_recent_turns is None else max_recent_turns
        check_limits(limit, recent, self.minimum_budget(), self.largest_output, self.context_window)
        policy = self.fold_policy if fold_policy is None else policies.policy(fold_policy).name
        self.max_input_tokens, self.max_recent_turns, self.fold_policy = limit, recent, policy

    def switch_backend(self, backend: Backend, model: str, token_counter: TokenCounter | None = None) -> None:
        """Continues on ``backend`` and ``model`` from the next request; the new server's count is learned afresh."""
        self.backend, self.model = backend, model
        self.token_counter: TokenCounter = token_counter or LocalTokenCounter()
        self.calibration = Calibration(exact=backend.profile.counts_like_o200k)
        self.server_window: int | None = None  # the server's context window, as an overflow error gave it

    @property
    def largest_output(self) -> int:
        return max(self.max_reply_tokens or 0, self.max_summary_tokens)

    def budget_in_force(self) -> int:
        return budget.budget_in_force(self.max_input_tokens, self.server_window, self.largest_output)

    def window_too_small(self) -> bool:
        return budget.window_too_small(self.server_window, self.largest_output)

    def minimum_budget(self) -> int:
        """The smallest budget, in the server's tokens, for a reply and for a summary request."""
        return self.calibration.server_estimate(self.sizes().minimum_budget)

    def local_budget(self) -> int:
        """``budget_in_force()`` in local tokens; where the server counts each request itself, for the texts a request may carry."""
        counted_by_server = not self.calibration.exact and self.exact_source() is not None
        texts = [self.system_prompt, self.summary, *(m.content for m in self.conversation.unfolded_messages)] if counted_by_server else None
        return budget.local_budget(self.calibration, self.budget_in_force(), texts)

    @property
    def counting(self) -> str:
        return budget.counting_words(self.exact_source(), self.calibration, self.backend.offline)

    def exact_source(self) -> str | None:
        return budget.exact_source(self.backend, self.model, self.calibration)

    def learn_overflow(self, overflow: ContextOverflowError, local: int, texts: Sequence[str]) -> None:
        """Learns the server's count and window from an overflow error on a request of ``local`` tokens and ``texts``."""
        self.calibration, self.server_window = budget.overflow_learned(overflow, local, self.calibration, self.server_window, texts)

    def sizes(self) -> Sizes:
        """The request sizes under the summary cap, ``max_summary_tokens`` under either fold policy (chosen by measurement:
        README, "Cost against retention"), whose word limit the summary instructions ask for."""
        cap = self.max_summary_tokens
        return request_sizes(self.model, self.system_prompt, with_summary_cap(self.summary_instructions, cap), cap)

    def turn(self, user_text: str) -> AbstractContextManager[Turn]:
        """One user turn that completes or leaves no trace in the history (see ``turn.transaction``)."""
        return transaction(self, user_text)

    def check_new_message(self, user_text: str) -> None:
        """Refuses, before anything is kept or sent, a message no turn could take (``fitting.check_new_message``)."""
        fitting.check_new_message(self, user_text)

    def prepare(self) -> PreparedContext:
        """This turn's context, once the plan's folds are made (``fitting.prepare`` says what it raises)."""
        self.last_prepared = fitting.prepare(self)
        return self.last_prepared

    def fold(self, messages: tuple[Message, ...], span: tuple[int, int]) -> SummaryVersion:
        """One summary request folding ``messages`` (history ``span``) into a new summary version (``fitting.fold``)."""
        return fitting.fold(self, messages, span)

    def fold_due(self) -> int:
        """The history index a prefold folds through now; ``summarized_message_count`` when nothing is due."""
        return self.summarized_message_count + fitting.prefold_plan(self).fold

    def prefold(self) -> SummaryVersion | None:
        """Folds now what the next turn is certain to fold (``fitting.prefold``); None when nothing is due."""
        return fitting.prefold(self)

    def add_message(self, message: Message) -> None:
        """Appends ``message`` to the history, its tokens counted once; the calibration sees its kind of text."""
        self.calibration = self.calibration.seeing([message.content])
        self.conversation = self.conversation.adding(message, self.message_tokens(message))

    @property
    def history(self) -> list[Message]:
        """Every message of the conversation, in full (a copy: only the memory changes it)."""
        return list(self.conversation.messages)

    @property
    def summary_versions(self) -> list[SummaryVersion]:
        return list(self.conversation.versions)

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
        return self.conversation.pending

    def message_tokens(self, message: Message) -> int:
        """The local tokens ``message`` adds to a request, its text tokenized once per conversation."""
        return self._tokens.message(message.role, message.content)

    def full_history_tokens(self) -> int:
        """What one request with every message in history would cost, instructions included."""
        return self.sizes().fixed + self.conversation.tokens

    # -- the article's API, name for name: a thin face over the members above ------

    @property
    def summary(self) -> str:
        return self.conversation.summary

    @property
    def summarized_message_count(self) -> int:
        return self.conversation.folded

    @property
    def session_total_tokens(self) -> int:
        return self.ledger.total

    def add_user_message(self, content: str) -> None:
        """Appends a user message. Raises ValueError if a user message is already pending."""
        if self.has_pending_turn:
            raise ValueError("A user message is already waiting for its reply; finish or roll back that turn first.")
        self.add_message(Message("user", content))
        self.last_prepared = None  # belongs to the previous turn

    def rollback_last_user_message(self) -> None:
        self.conversation = self.conversation.without_pending()

    def format_messages(self, messages: Sequence[Message]) -> str:
        return "\n".join(f"{message['role']}: {message['content']}" for message in messages)

    def count_input_tokens(self, messages: Sequence[Message]) -> int:
        return self.token_counter.count(self.model, self.request_instructions(), messages)

    def update_summary(self, new_messages: Sequence[Message]) -> int:
        """Merges ``new_messages`` into the summary without moving the pointer; returns the request's tokens."""
        return self.fold(tuple(new_messages), (self.summarized_message_count,) * 2).tokens

    def create_context_messages(self, recent_messages: Sequence[Message], current_user_message: Message) -> list[Message]:
        """Summary, window and message, in the wire's roles (see ``memora.memory.context``)."""
        return [*lead_messages(self.backend.profile, self.system_prompt, self.summary), *recent_messages, current_user_message]

    def request_instructions(self) -> str:
        return request_instructions(self.backend.profile, self.system_prompt)

    def prepare_context(self) -> dict[str, Any]:
        return self.prepare().as_dict()

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
        """Completes the pending turn with ``assistant_reply``; records the request (``turn.reply_record``); returns its
        stats. ``cut``: the reply stopped at its cap (kept, and marked). Raises ValueError when no user message is pending."""
        if not self.has_pending_turn:
            raise ValueError("There is no pending user message to reply to.")
        record = reply_record(self, context_messages, response_tokens, usage, latency_s=latency_s, cut=cut)
        fitting.record_request(self, record, [self.request_instructions(), *(m.content for m in context_messages)])
        self.add_message(Message("assistant", assistant_reply))
        self.last_context = list(context_messages)
        if self.on_change is not None:
            self.on_change(self, "turn")
        return TurnStats(record, self.session_total_tokens)

    def get_status(self) -> dict[str, int | bool]:
        return {
            "History messages": len(self.conversation.messages),
            "Summarized messages": self.summarized_message_count,
            "Last context messages": len(self.last_context),
            "Summary available": bool(self.summary),
            "Session total tokens": self.session_total_tokens,
        }


def backend_of(client: Any) -> Backend:
    """The backend behind what the article calls ``client``: a memora backend as it is, or the one an article-style
    client (``memora.backends.compat.ArticleClient``) carries. Raises TypeError for anything else, an
    ``openai.OpenAI`` client included: wrap it (``memora.backends.openai_responses.OpenAIResponsesBackend``)."""
    if isinstance(client, Backend):
        return client
    if isinstance(getattr(client, "backend", None), Backend):
        return client.backend
    raise TypeError(
        f"expected a memora backend (memora.backends), not {type(client).__name__}; "
        "wrap an openai.OpenAI client in memora.backends.openai_responses.OpenAIResponsesBackend"
    )


# -- one turn: prepare, stream, commit or leave no trace ------------------------------------------------------------


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
    fitting.check_caps(memory, user_text)
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
            self.prepared = prepared = memory.prepare()
            request = ReplyRequest(
                model=memory.model,
                instructions=prepared.instructions,
                messages=prepared.context_messages,
                counted_input_tokens=prepared.input_tokens,
                input_budget=memory.budget_in_force(),
                max_output_tokens=memory.max_reply_tokens,
            )
            began = time.perf_counter()
            try:
                for item in memory.backend.stream_reply(request):
                    if isinstance(item, Completion):
                        self._commit(item, began)
                        return
                    yield item
            except ContextOverflowError as overflow:
                # The server refuses before its first token, so nothing was yielded for this attempt.
                if attempt:
                    raise fitting.overflow_error() from None
                memory.learn_overflow(overflow, prepared.input_tokens, prepared.texts)
                if memory.window_too_small():
                    raise fitting.overflow_error() from None
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
    memory: ShortTermMemory, context_messages: Sequence[Message], response_tokens: int, usage: Usage | None, *, latency_s: float, cut: bool
) -> UsageRecord:
    """The ledger's record of the pending turn's reply request, sent with ``context_messages``: what ``prepare`` planned
    for it (nothing when the article's loop sent a context of its own, then counted here). ``cut``: the reply stopped at
    its cap. Without ``usage`` (the article's ``finish_turn``) the record has only ``response_tokens``, as the total."""
    prepared = memory.last_prepared
    fields = {
        "turn": memory.conversation.turn_number,
        "kind": "reply",
        "model": memory.served_by,
        "latency_s": latency_s,
        "cut": cut,
        "counted_input_tokens": prepared.input_tokens if prepared else memory.count_input_tokens(context_messages),
        "full_history_tokens": memory.full_history_tokens(),
        "input_budget": memory.max_input_tokens,
        "context_messages": len(context_messages),
        "newly_summarized": prepared.newly_summarized_count if prepared else 0,
        "summary_tokens": prepared.summary_token_usage if prepared else 0,
        "server_counted_input_tokens": prepared.server_input_tokens if prepared else None,
    }
    if usage is None:
        return UsageRecord(**fields, input_tokens=None, output_tokens=None, total_tokens=response_tokens)
    return UsageRecord.of(**fields, usage=usage)
