"""One user turn in progress: prepare the context, stream the reply, commit it or leave no trace."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from memora.memory.backend import Backend, BackendError, Completion, ContextOverflowError, ReplyRequest
from memora.memory.budget import overflow_error
from memora.memory.history import History
from memora.memory.limits import SessionLimits
from memora.memory.values import PreparedContext, TurnStats
from memora.messages import Message
from memora.tokens.usage import Usage, UsageRecord


class Memory(Protocol):
    """The members of ``ShortTermMemory`` that a turn reads and calls."""

    model: str
    backend: Backend
    lock: AbstractContextManager[Any]
    max_reply_tokens: int | None
    max_input_tokens: int
    limits: SessionLimits
    conversation: History
    last_prepared: PreparedContext | None

    @property
    def session_total_tokens(self) -> int: ...
    @property
    def served_by(self) -> str: ...

    def add_user_message(self, content: str) -> None: ...
    def rollback_last_user_message(self) -> None: ...
    def prepare(self) -> PreparedContext: ...
    def budget_in_force(self) -> int: ...
    def learn_overflow(self, overflow: ContextOverflowError, local: int, texts: Sequence[str]) -> None: ...
    def window_too_small(self) -> bool: ...
    def count_input_tokens(self, messages: Sequence[Message]) -> int: ...
    def full_history_tokens(self) -> int: ...
    def finish_turn(
        self,
        assistant_reply: str,
        context_messages: Sequence[Message],
        response_tokens: int,
        *,
        usage: Usage | None,
        latency_s: float,
        cut: bool,
    ) -> TurnStats: ...


@contextmanager
def transaction(memory: Memory, user_text: str) -> Iterator[Turn]:
    """``memory.turn(user_text)``: one user turn that completes or leaves no trace in the history.

    Appends the message and yields a ``Turn``; unless its reply was committed,
    removes the message on leaving, after any exception (BaseException too:
    Streamlit's stop and rerun) or an abandoned stream. ``turn.user_text`` keeps
    the text; summaries folded before a failure stay folded. Raises ValueError
    (LimitReached for a session cap) before appending anything. The memory's lock
    is held throughout, so another thread of the same session waits for the rollback.
    """
    check_limits(memory, user_text)
    with memory.lock:
        memory.add_user_message(user_text)
        active = Turn(memory, user_text)
        try:
            yield active
        finally:
            if not active.committed:
                memory.rollback_last_user_message()


def check_limits(memory: Memory, user_text: str) -> None:
    """Raises ValueError for a blank message, LimitReached when a session cap refuses it (the character cap first,
    so that a pasted book is never tokenized)."""
    if not user_text.strip():
        raise ValueError("The message is empty.")
    memory.limits.check(user_text, len(memory.conversation.messages) // 2, memory.session_total_tokens)


class Turn:
    """One user turn in progress; see ``ShortTermMemory.turn``."""

    def __init__(self, memory: Memory, user_text: str) -> None:
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
                    raise overflow_error() from None
                memory.learn_overflow(overflow, prepared.input_tokens, prepared.texts)
                if memory.window_too_small():
                    raise overflow_error() from None
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
    memory: Memory, context_messages: Sequence[Message], response_tokens: int, usage: Usage | None, *, latency_s: float, cut: bool
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
