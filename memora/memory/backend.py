"""The memory's seam to a model server: the ``Backend`` Protocol it calls, what it sends and gets
back, and its errors.

The memory defines what it needs; ``memora.backends`` holds one module per server that implements
it, and raises these errors. Nothing here imports an SDK: the memory is taught without one. A client
the article passes (an ``openai.OpenAI``) becomes a ``Backend`` through an adapter that a part above
registers (``register_client_adapter``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memora.text.messages import Message
from memora.text.usage import Usage


@dataclass(frozen=True)
class ReplyRequest:
    """One reply request: the instructions plus the context messages, in order.

    ``counted_input_tokens`` and ``input_budget`` are the memory's own figures for
    this request. Model backends ignore them; the offline backend reports them.
    """

    model: str
    instructions: str
    messages: tuple[Message, ...]
    counted_input_tokens: int | None = None
    input_budget: int | None = None
    max_output_tokens: int | None = None
    """The reply's output cap, so that no reply can run to the end of the server's context.
    None sends no cap."""


@dataclass(frozen=True)
class SummaryRequest:
    """Fold ``new_messages`` into ``existing_summary``.

    ``existing_summary`` is ``""`` before the first fold. ``max_output_tokens``
    bounds the new summary, so that it always fits the input budget. ``input_text``
    is what is sent beside the instructions: the two in the article's layout
    (``memora.memory.server.summary_request`` builds the request with it).
    """

    model: str
    instructions: str
    existing_summary: str
    new_messages: tuple[Message, ...]
    max_output_tokens: int
    input_text: str


@dataclass(frozen=True)
class Completion:
    """A finished model response: its whole text and what it used.

    ``cut`` is True when the server stopped it at its output cap
    (``finish_reason="length"``, or ``status="incomplete"`` for the output limit):
    the text is whole as far as it goes, but the model had not finished.
    """

    text: str
    usage: Usage
    cut: bool = False


@dataclass(frozen=True)
class ServerProfile:
    """What the memory must know about a server to plan for it.

    ``single_system_message``: the server's chat templates keep only the first
    system message (llama.cpp's ``chatml`` and 15 other formats drop the rest
    silently), so the summary must travel inside that one message.
    ``counts_like_o200k``: the server bills with o200k_base (OpenAI itself, and
    Memora's own offline engine), so local counts are its counts. Any other
    server's tokenizer is unknown until its reported usage shows the gap.
    """

    single_system_message: bool = False
    counts_like_o200k: bool = True


OPENAI_PROFILE = ServerProfile()
CHAT_SERVER_PROFILE = ServerProfile(single_system_message=True, counts_like_o200k=False)


class BackendError(RuntimeError):
    """A model request failed; the message is safe to show to users (no secrets)."""


class ContextOverflowError(BackendError):
    """The server refused a request longer than its context window (HTTP 400, kind ``overflow``).

    ``prompt_tokens`` is the server's own count of the request's input and ``window`` its context
    size, when its message gives them. The memory handles this error itself (it learns the figures,
    folds or cuts, and retries once); it never reaches the learner as advice to resend, since a
    resend would fail the same way. The backends raise it.
    """

    kind = "overflow"

    def __init__(
        self,
        message: str,
        prompt_tokens: int | None,
        window: int | None,
        status_code: int | None = 400,
    ) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.window = window
        self.status_code = status_code


@runtime_checkable
class Backend(Protocol):
    """A model behind Memora.

    ``label`` names it in the UI ("Offline (no model)", "OpenAI Responses"), and ``offline`` is True
    only for the offline engine, which is no language model. ``profile`` says where the summary must
    go and whose tokenizer the server uses. Counting a request by the server is a capability every
    backend declares (``count_request``), answering None where it has none.
    """

    label: str
    offline: bool
    profile: ServerProfile

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        """Yields text deltas as they arrive, then exactly one ``Completion`` last.

        Raises ``BackendError`` (or a subclass) on failure, possibly after some
        deltas were yielded; the caller then discards the partial text.
        """
        ...

    def summarize(self, request: SummaryRequest) -> Completion:
        """Returns the merged summary. Raises ``BackendError`` on failure."""
        ...

    def count_request(
        self, model: str, instructions: str, messages: Sequence[Message]
    ) -> int | None:
        """The server's own count of a request's input tokens, as it will render it (template
        included), before it is sent; None where it cannot count (no tokenizer endpoint, or one that
        failed): the memory then plans with its local count and a learned margin. Only a count
        endpoint the user asked for raises, ``BackendError`` when it fails (OpenAI's,
        ``MEMORA_TOKEN_COUNTING=api``, as the article's count does): the turn then leaves no trace.
        """
        ...

    def counting_source(self, model: str) -> str | None:
        """Which endpoint ``count_request`` asks, in words for the Status panel and the REPL
        (``"llama.cpp /apply-template + /tokenize"``); None where the server has none."""
        ...


ClientAdapter = Callable[[object], "Backend | None"]
"""Turns a client it recognises into a ``Backend``; None for any other client."""

_client_adapters: list[ClientAdapter] = []


def register_client_adapter(adapter: ClientAdapter) -> None:
    """Lets a part above the memory hand it the clients it knows: ``memora.backends`` registers the
    one for ``openai.OpenAI`` and OpenAI-compatible clients when it is imported. Registering the
    same adapter twice is a no-op."""
    if adapter not in _client_adapters:
        _client_adapters.append(adapter)


def backend_of(client: object) -> Backend:
    """The backend behind what the article calls ``client``.

    A memora ``Backend`` is taken as it is; any other client goes to the registered adapters, and
    the first that recognises it gives the backend (an ``openai.OpenAI`` client, once
    ``memora.backends`` is imported, which ``from memora import ShortTermMemory`` does). Raises
    TypeError, naming the type, for anything else.
    """
    if isinstance(client, Backend):
        return client
    for adapter in _client_adapters:
        backend = adapter(client)
        if backend is not None:
            return backend
    hint = (
        ""
        if _client_adapters
        else " (import memora.backends first: it registers the OpenAI client's adapter)"
    )
    raise TypeError(
        "ShortTermMemory needs a memora backend or an OpenAI client (with responses.create), "
        f"not {type(client).__name__}{hint}"
    )
