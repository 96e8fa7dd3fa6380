"""Model backends behind one small Protocol, the memory's seam (``memora.memory.backend.Backend``):
its types are imported from there, and only from there.

Importing this package registers the adapter that lets ``ShortTermMemory(client=OpenAI())`` run as
the article writes it (``openai_client_backend``): the memory itself imports no SDK.
"""

from __future__ import annotations

from memora.backends.offline import OfflineBackend
from memora.memory.backend import Backend, register_client_adapter

__all__ = ["OfflineBackend", "openai_client_backend"]


def openai_client_backend(client: object) -> Backend | None:
    """An ``openai.OpenAI`` client, or any OpenAI-compatible one (it has ``responses.create``), as
    the Responses backend in the article's layout: instructions apart, the summary as a
    ``developer`` message, counted locally with o200k_base. None for anything else. A proxy over a
    local model needs ``PROXY_PROFILE``: build that backend yourself
    (``memora.backends.openai_responses``), as the app's settings do."""
    if not callable(getattr(getattr(client, "responses", None), "create", None)):
        return None
    from memora.backends.openai_responses import OpenAIResponsesBackend

    return OpenAIResponsesBackend(client)  # type: ignore[arg-type]


register_client_adapter(openai_client_backend)
