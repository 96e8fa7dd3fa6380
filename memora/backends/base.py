"""What the backends share beside the memory's seam (``memora.memory.backend``, which every backend implements
and where its types are imported from): reading a reply stream to its end."""

from __future__ import annotations

from collections.abc import Iterator

from memora.memory.backend import BackendError, Completion


def drain(stream: Iterator[str | Completion]) -> Completion:
    """Consumes a reply stream and returns its ``Completion``.

    Raises BackendError if the stream ends without one.
    """
    for item in stream:
        if isinstance(item, Completion):
            return item
    raise BackendError("the model's stream ended before the response was complete")
