"""What the backends share beside the memory's seam (``memora.memory.backend``, which every backend
implements and where its types are imported from): reading a reply stream to its end, and the SDK
client's own retries."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Self

from memora.memory.backend import BackendError, Completion


def drain(stream: Iterator[str | Completion]) -> Completion:
    """Consumes a reply stream and returns its ``Completion``.

    Raises BackendError if the stream ends without one.
    """
    for item in stream:
        if isinstance(item, Completion):
            return item
    raise BackendError("the model's stream ended before the response was complete")


class SDKClientRetries:
    """What the two SDK backends share: how often their ``client`` (an ``openai.OpenAI``) retries a
    failed request by itself, and a copy of the backend whose client never does."""

    client: Any

    @property
    def retries(self) -> int:
        """How often the SDK's client retries a failed request by itself
        (``MEMORA_MAX_RETRIES``)."""
        return self.client.max_retries

    def sending_once(self) -> Self:
        """This backend on a client that never retries: each call is one HTTP request, so that a
        caller that books every request (``memora.classroom.guard``) can retry under its own
        bookings. Everything else is shared."""
        once = copy.copy(self)
        once.client = self.client.with_options(max_retries=0)
        return once
