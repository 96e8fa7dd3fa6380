"""The article's Memora v0.7 API, name for name, so that its main loop runs unchanged.

``ShortTermMemory`` inherits these methods; each is what the article's loop
calls, built on the memory's own state and planner. The planner-driven parts
(``prepare``, folding, transactional turns) are in ``core.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memora.memory.context import lead_messages, request_instructions
from memora.memory.values import TurnStats
from memora.messages import Message
from memora.tokens.usage import Usage, UsageRecord

if TYPE_CHECKING:
    from memora.memory.core import ShortTermMemory


class ArticleAPI:
    """The article's attributes and methods. Mixed into ``ShortTermMemory`` only."""

    @property
    def summary(self: ShortTermMemory) -> str:
        return self.summary_versions[-1].text if self.summary_versions else ""

    @property
    def summarized_message_count(self: ShortTermMemory) -> int:
        return self.summary_versions[-1].summarized_message_count if self.summary_versions else 0

    @property
    def session_total_tokens(self: ShortTermMemory) -> int:
        return self.ledger.total

    def add_user_message(self: ShortTermMemory, content: str) -> None:
        """Appends a user message. Raises ValueError if a user message is already pending."""
        if self.has_pending_turn:
            raise ValueError("A user message is already waiting for its reply; finish or roll back that turn first.")
        self._append(Message("user", content))
        self.last_prepared = None  # belongs to the previous turn

    def rollback_last_user_message(self: ShortTermMemory) -> None:
        """Removes the pending user message, if there is one."""
        if self.has_pending_turn:
            self._pop()

    def format_messages(self: ShortTermMemory, messages: Sequence[Message]) -> str:
        return "\n".join(f"{message['role']}: {message['content']}" for message in messages)

    def count_input_tokens(self: ShortTermMemory, messages: Sequence[Message]) -> int:
        """The request's instructions plus ``messages``, by this memory's token counter."""
        return self.token_counter.count(self.model, self.request_instructions(), messages)

    def update_summary(self: ShortTermMemory, new_messages: Sequence[Message]) -> int:
        """Merges ``new_messages`` into the summary without moving the pointer; returns the request's tokens."""
        pointer = self.summarized_message_count
        return self._fold(tuple(new_messages), (pointer, pointer)).tokens

    def create_context_messages(self: ShortTermMemory, recent_messages: Sequence[Message], current_user_message: Message) -> list[Message]:
        """Summary, window and message, in the wire's roles (see ``memora.memory.context``)."""
        return [*lead_messages(self.backend.profile, self.system_prompt, self.summary), *recent_messages, current_user_message]

    def request_instructions(self: ShortTermMemory) -> str:
        return request_instructions(self.backend.profile, self.system_prompt)

    def prepare_context(self: ShortTermMemory) -> dict[str, Any]:
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
        """Completes the pending turn with ``assistant_reply``; records the request; returns its stats.

        Without ``usage`` the ledger has only ``response_tokens`` as the total. ``cut``: the reply
        stopped at its cap (it is kept, and marked). Raises ValueError when no user message is pending.
        """
        if not self.has_pending_turn:
            raise ValueError("There is no pending user message to reply to.")
        prepared = self.last_prepared
        fields = {
            "turn": self.turn_number,
            "kind": "reply",
            "model": self.served_by,
            "latency_s": latency_s,
            "cut": cut,
            "counted_input_tokens": prepared.input_tokens if prepared else self.count_input_tokens(context_messages),
            "full_history_tokens": self.full_history_tokens(),
            "input_budget": self.max_input_tokens,
            "context_messages": len(context_messages),
            "newly_summarized": prepared.newly_summarized_count if prepared else 0,
            "summary_tokens": prepared.summary_token_usage if prepared else 0,
            "server_counted_input_tokens": prepared.server_input_tokens if prepared else None,
        }
        if usage is None:
            record = UsageRecord(**fields, input_tokens=None, output_tokens=None, total_tokens=response_tokens)
        else:
            record = UsageRecord.of(**fields, usage=usage)
        self._record(record, [self.request_instructions(), *(m.content for m in context_messages)])
        self._append(Message("assistant", assistant_reply))
        self.last_context = list(context_messages)
        self._changed("turn")
        return TurnStats.of(record, self.session_total_tokens)

    def get_status(self: ShortTermMemory) -> dict[str, int | bool]:
        return {
            "History messages": len(self.history),
            "Summarized messages": self.summarized_message_count,
            "Last context messages": len(self.last_context),
            "Summary available": bool(self.summary),
            "Session total tokens": self.session_total_tokens,
        }
