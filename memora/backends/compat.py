"""An article-style client over any memora backend.

The article's loop calls ``client.responses.create(...)`` and reads
``response.output_text`` and ``response.usage``. ``ArticleClient`` gives a
memora backend that surface, so the article's code runs offline unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from memora.backends import Backend, ReplyRequest
from memora.backends.base import drain
from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter


@dataclass(frozen=True)
class ArticleUsage:
    input_tokens: int
    output_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class ArticleResponse:
    output_text: str
    usage: ArticleUsage


@dataclass(frozen=True)
class InputTokenCount:
    input_tokens: int


def _messages(items: Iterable[Mapping[str, str]] | str) -> tuple[Message, ...]:
    if isinstance(items, str):
        return (Message("user", items),)
    return tuple(Message(item["role"], item["content"]) for item in items)  # type: ignore[arg-type]


class _InputTokens:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def count(self, *, model: str, instructions: str, input: Iterable[Mapping[str, str]] | str) -> InputTokenCount:
        """Counts with the backend's server where it can (``count_request``), else locally with o200k_base."""
        messages = _messages(input)
        counted = self._backend.count_request(model, instructions, messages)
        return InputTokenCount(LocalTokenCounter().count(model, instructions, messages) if counted is None else counted)


class _Responses:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.input_tokens = _InputTokens(backend)

    def create(self, *, model: str, instructions: str, input: Iterable[Mapping[str, str]] | str) -> ArticleResponse:
        completion = drain(self._backend.stream_reply(ReplyRequest(model, instructions, _messages(input))))
        usage = completion.usage
        return ArticleResponse(completion.text, ArticleUsage(usage.input_tokens, usage.output_tokens, usage.total_tokens))


class ArticleClient:
    """``client.responses.create`` and ``client.responses.input_tokens.count`` over ``backend``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.responses = _Responses(backend)
