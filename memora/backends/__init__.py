"""Model backends behind one small Protocol (see ``base.Backend``)."""

from __future__ import annotations

from typing import Any

from memora.backends.base import Backend, BackendError, Completion, ReplyRequest, SummaryRequest
from memora.backends.offline import OfflineBackend

__all__ = ["Backend", "BackendError", "Completion", "OfflineBackend", "ReplyRequest", "SummaryRequest", "as_backend"]


def as_backend(client: Any) -> Backend:
    """The backend for what the article calls ``client``.

    A memora backend is returned as it is; an article-style client made by
    ``memora.backends.compat.ArticleClient`` gives its backend back; anything with a
    ``responses`` attribute (an ``openai.OpenAI`` client) is wrapped. The memory itself takes only the first two
    (``memora.memory.core.backend_of``): it imports no SDK.
    Raises TypeError for anything else.
    """
    if isinstance(client, Backend):
        return client
    if isinstance(getattr(client, "backend", None), Backend):
        return client.backend
    if hasattr(client, "responses"):
        from memora.backends.openai_responses import OpenAIResponsesBackend

        return OpenAIResponsesBackend(client)
    raise TypeError(f"expected a memora backend or an openai.OpenAI client, got {type(client).__name__}")
