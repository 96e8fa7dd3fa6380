"""The article's Memora v0.7 memory, ported as written, as the benchmark's reference.

Ported from the article's ``ShortTermMemory`` (seed/000_fd38596620b781c3.txt),
loop for loop. Two changes of plumbing only, so it runs against a memora backend:

- ``count_input_tokens`` calls ``backend.count_request`` where the article
  calls ``client.responses.input_tokens.count``: one model call of kind "count"
  (the backend must count requests: ``RecordingBackend(count_remotely=True)``);
- ``update_summary`` calls ``backend.summarize`` where the article calls
  ``client.responses.create`` with the summary instructions; the request's input
  text is the article's, byte for byte (``memora.memory.server.summary_request``).

This is not Memora's memory; it exists so that the benchmark can compare.
"""

from __future__ import annotations

from typing import Any

from benchmarks.memory.recording import SUMMARY_TOKEN_CAP
from memora.memory.backend import Backend
from memora.memory.server import summary_request
from memora.text.messages import Message


class ArticleMemory:
    """The article's v0.7 ``ShortTermMemory``: one count call per try, one summary call per folded pair."""

    def __init__(
        self,
        backend: Backend,
        model: str,
        system_prompt: str,
        summary_instructions: str,
        max_input_tokens: int,
        max_recent_turns: int,
        max_summary_tokens: int = SUMMARY_TOKEN_CAP,
    ) -> None:
        # The article sets no output cap; the bench's recorder caps every strategy's summaries alike.
        self.max_summary_tokens = max_summary_tokens
        self.backend = backend
        self.model = model
        self.system_prompt = system_prompt
        self.summary_instructions = summary_instructions
        self.max_input_tokens = max_input_tokens
        self.max_recent_turns = max_recent_turns

        self.history: list[dict[str, str]] = []
        self.summary = ""
        self.summarized_message_count = 0
        self.last_context: list[dict[str, str]] = []
        self.session_total_tokens = 0

    def add_user_message(self, content: str) -> None:
        self.history.append({"role": "user", "content": content})

    def rollback_last_user_message(self) -> None:
        if self.history and self.history[-1]["role"] == "user":
            self.history.pop()

    def count_input_tokens(self, messages: list[dict[str, str]]) -> int:
        counted = self.backend.count_request(
            self.model,
            self.system_prompt,
            [Message(m["role"], m["content"]) for m in messages],  # type: ignore[arg-type]
        )
        if counted is None:
            raise TypeError("the article counts each try with its server: give it a backend that counts requests")
        return counted

    def update_summary(self, new_messages: list[dict[str, str]]) -> int:
        completion = self.backend.summarize(
            summary_request(
                self.model,
                self.summary_instructions,
                self.summary,
                [Message(m["role"], m["content"]) for m in new_messages],  # type: ignore[arg-type]
                self.max_summary_tokens,
            )
        )
        self.summary = completion.text.strip()
        summary_tokens = completion.usage.total_tokens
        self.session_total_tokens += summary_tokens
        return summary_tokens

    def create_context_messages(self, recent_messages: list[dict[str, str]], current_user_message: dict[str, str]) -> list[dict[str, str]]:
        context_messages = []
        if self.summary:
            context_messages.append(
                {
                    "role": "developer",
                    "content": (
                        "The following is a compact summary of earlier "
                        "conversation. Use it as background context. "
                        "If it conflicts with recent messages, prefer "
                        "the recent messages.\n\n" + self.summary
                    ),
                }
            )
        context_messages.extend(recent_messages)
        context_messages.append(current_user_message)
        return context_messages

    def prepare_context(self) -> dict[str, Any]:
        if not self.history:
            raise ValueError("Conversation History is empty.")
        if self.history[-1]["role"] != "user":
            raise ValueError("The last message must be a User Message before building the Context.")

        completed_messages = self.history[:-1]
        current_user_message = self.history[-1]
        summary_token_usage = 0
        newly_summarized_count = 0
        recent_message_limit = self.max_recent_turns * 2
        target_summarized_count = max(0, len(completed_messages) - recent_message_limit)

        if target_summarized_count > self.summarized_message_count:
            new_messages = completed_messages[self.summarized_message_count : target_summarized_count]
            summary_token_usage += self.update_summary(new_messages)
            newly_summarized_count += len(new_messages)
            self.summarized_message_count = target_summarized_count

        recent_messages = completed_messages[self.summarized_message_count :]

        while True:
            context_messages = self.create_context_messages(recent_messages, current_user_message)
            input_tokens = self.count_input_tokens(context_messages)
            if input_tokens <= self.max_input_tokens:
                return {
                    "context_messages": context_messages,
                    "input_tokens": input_tokens,
                    "summary_token_usage": summary_token_usage,
                    "newly_summarized_count": newly_summarized_count,
                }
            if len(recent_messages) < 2:
                raise ValueError("The current User Message and the summary exceed MAX_INPUT_TOKENS.")
            oldest_turn = recent_messages[:2]
            summary_token_usage += self.update_summary(oldest_turn)
            newly_summarized_count += len(oldest_turn)
            self.summarized_message_count += len(oldest_turn)
            recent_messages = recent_messages[2:]

    def finish_turn(self, assistant_reply: str, context_messages: list[dict[str, str]], response_tokens: int) -> None:
        self.history.append({"role": "assistant", "content": assistant_reply})
        self.last_context = [message.copy() for message in context_messages]
        self.session_total_tokens += response_tokens
