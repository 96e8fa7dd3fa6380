"""The backends' side of the memory's seam (``memora.memory.backend``), which every backend implements."""

from __future__ import annotations

from collections.abc import Iterator

from memora.memory.backend import (
    CHAT_SERVER_PROFILE,
    OPENAI_PROFILE,
    Backend,
    BackendError,
    Completion,
    ContextOverflowError,
    ReplyRequest,
    ServerProfile,
    SummaryRequest,
)

__all__ = [
    "CHAT_SERVER_PROFILE",
    "OPENAI_PROFILE",
    "Backend",
    "BackendError",
    "Completion",
    "ContextOverflowError",
    "ReplyRequest",
    "ServerProfile",
    "SummaryRequest",
    "drain",
]


def drain(stream: Iterator[str | Completion]) -> Completion:
    """Consumes a reply stream and returns its ``Completion``.

    Raises BackendError if the stream ends without one.
    """
    for item in stream:
        if isinstance(item, Completion):
            return item
    raise BackendError("the model's stream ended before the response was complete")
