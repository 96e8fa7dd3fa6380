"""The memory strategies the benchmark compares, each driving one RecordingBackend.

Every strategy plays a turn the same way a page would: add the user message,
build the context, stream the reply, commit. ``play_turn`` returns the time
from "send" to the first reply delta, which includes any summary or count
request the strategy makes before the reply can start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from benchmarks.memory.article import ArticleMemory
from benchmarks.memory.recording import RecordingBackend
from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, MAX_RECENT_TURNS, FoldPolicy, ShortTermMemory, policies
from memora.memory.backend import Completion, ReplyRequest
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INSTRUCTIONS, SYSTEM_PROMPT


@dataclass(frozen=True)
class Limits:
    """The budget every strategy gets: the article's defaults unless changed."""

    max_input_tokens: int = MAX_INPUT_TOKENS
    max_recent_turns: int = MAX_RECENT_TURNS


class Strategy(Protocol):
    name: str
    backend: RecordingBackend

    def play_turn(self, user_text: str) -> float:
        """Plays one whole turn; returns seconds from send to the first reply delta."""
        ...


def _stream_until_done(backend: RecordingBackend, request: ReplyRequest, began: float) -> tuple[str, Completion, float]:
    first: float | None = None
    parts: list[str] = []
    for item in backend.stream_reply(request):
        if isinstance(item, Completion):
            # A real model may reply with nothing: its first token, such as it is, came with the completion.
            return "".join(parts), item, time.perf_counter() - began if first is None else first
        if first is None:
            first = time.perf_counter() - began
        parts.append(item)
    raise RuntimeError("the recording backend always ends with a Completion")


class FullHistory:
    """Sends every message of the conversation, every turn; never summarizes."""

    description = "full history (everything sent every turn)"

    def __init__(self, backend: RecordingBackend, limits: Limits) -> None:
        self.name = "full-history"
        self.backend = backend
        self.history: list[Message] = []

    def play_turn(self, user_text: str) -> float:
        began = time.perf_counter()
        self.history.append(Message("user", user_text))
        request = ReplyRequest(DEFAULT_MODEL, SYSTEM_PROMPT, tuple(self.history))
        text, _, first = _stream_until_done(self.backend, request, began)
        self.history.append(Message("assistant", text))
        return first


class Article:
    """The article's v0.7 algorithm as written (see ``article.py``)."""

    description = "article v0.7 as written (count call per try, summary call per folded pair)"

    def __init__(self, backend: RecordingBackend, limits: Limits) -> None:
        self.name = "article-v0.7"
        self.backend = backend
        backend.count_remotely = True  # the article counts each try with the API's count endpoint
        self.memory = ArticleMemory(
            backend,
            DEFAULT_MODEL,
            SYSTEM_PROMPT,
            SUMMARY_INSTRUCTIONS,
            limits.max_input_tokens,
            limits.max_recent_turns,
            max_summary_tokens=backend.summary_cap,
        )

    def play_turn(self, user_text: str) -> float:
        # The article's main loop, minus printing.
        began = time.perf_counter()
        memory = self.memory
        memory.add_user_message(user_text)
        try:
            stats = memory.prepare_context()
            messages = tuple(Message(m["role"], m["content"]) for m in stats["context_messages"])  # type: ignore[arg-type]
            text, completion, first = _stream_until_done(self.backend, ReplyRequest(DEFAULT_MODEL, SYSTEM_PROMPT, messages), began)
        except Exception:
            memory.rollback_last_user_message()
            raise
        memory.finish_turn(text, stats["context_messages"], completion.usage.total_tokens)
        return first


def memora_name(policy: FoldPolicy) -> str:
    """The bench's name for Memora under ``policy``: ``memora`` under the article's window, else ``memora-<policy>``."""
    return "memora" if policy == policies.DEFAULT else f"memora-{policy}"


class Memora:
    """Memora's ShortTermMemory through ``memory.turn``, under one registered fold policy; optionally prefolding."""

    def __init__(
        self,
        backend: RecordingBackend,
        limits: Limits,
        *,
        prefold: bool = False,
        fold_policy: FoldPolicy = policies.DEFAULT,
    ) -> None:
        self.name = memora_name(fold_policy) + ("+prefold" if prefold else "")
        self.description = f"Memora, the {fold_policy} fold policy" + (", prefold after each reply" if prefold else "")
        if prefold and fold_policy == policies.DEFAULT:
            self.description += " (what the page runs)"
        elif prefold and fold_policy == "watermark":
            self.description += " (recommended for applications)"
        self.backend = backend
        self.prefold = prefold
        self.memory = ShortTermMemory(
            backend,
            max_input_tokens=limits.max_input_tokens,
            max_recent_turns=limits.max_recent_turns,
            fold_policy=fold_policy,
            max_summary_tokens=backend.summary_cap,
        )

    def play_turn(self, user_text: str) -> float:
        began = time.perf_counter()
        first: float | None = None
        with self.memory.turn(user_text) as turn:
            for _ in turn.stream():
                if first is None:
                    first = time.perf_counter() - began
        assert first is not None and turn.committed
        if self.prefold:
            # Where the page would do it: after the reply is shown, while the user reads.
            self.backend.after_reply = True
            try:
                self.memory.prefold()
            finally:
                self.backend.after_reply = False
        return first
