"""OpenAI's Responses API: streaming replies, bounded summaries, server-side counting.

Timeouts and retries are the client's own (``openai.OpenAI(timeout=..., max_retries=...)``);
``memora.app.build.build_backend`` sets them from MEMORA_TIMEOUT and MEMORA_MAX_RETRIES.
The request bodies are built by ``reply_params``, ``summary_params`` and ``count_params``,
which the contract tests send to a mock of OpenAI's published spec.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import openai

from memora.backends.base import SDKClientRetries
from memora.backends.openai_errors import ModelServerError, explain_error, stream_ended_early
from memora.backends.redaction import redact
from memora.memory.backend import (
    OPENAI_PROFILE,
    BackendError,
    Completion,
    ReplyRequest,
    ServerProfile,
    SummaryRequest,
)
from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter, count_text, summary_request_tokens
from memora.text.usage import Usage

__all__ = [
    "REASONING_ALLOWANCE",
    "OpenAIResponsesBackend",
    "explain_error",
    "is_reasoning_model",
    "redact",
    "usage_of",
]

# Reasoning models spend part of max_output_tokens on reasoning before any text.
# The summary's text is bounded by the memory itself; this is headroom for thought.
REASONING_ALLOWANCE = 2048
_REASONING_MODEL = re.compile(r"^(gpt-5|o\d)")
_TEXT_DELTAS = ("response.output_text.delta", "response.refusal.delta")
_FINAL = ("response.completed", "response.incomplete")


OPENAI_HOST = "api.openai.com"
PROXY_PROFILE = ServerProfile(single_system_message=True, counts_like_o200k=False)
"""A Responses endpoint that is not OpenAI's: its model and tokenizer are unknown."""


def is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL.match(model))


def output_cap(model: str, max_output_tokens: int) -> int:
    """``max_output_tokens`` for the request: reasoning models spend part of it thinking first."""
    return (
        max_output_tokens + REASONING_ALLOWANCE if is_reasoning_model(model) else max_output_tokens
    )


def usage_of(
    usage: Any,
    estimate: Usage | None = None,
    *,
    by: str | None = None,
    bills: bool = False,
    teaches: bool = True,
) -> Usage:
    """Reads a Responses ``usage`` object, reported ``by`` the server (billed when ``bills``).

    Without one, returns ``estimate`` (local counts, marked estimated), or zeros
    marked estimated when there is no estimate either.
    """
    if usage is None:
        return estimate if estimate is not None else Usage(0, 0, estimated=True)
    input_details = getattr(usage, "input_tokens_details", None)
    output_details = getattr(usage, "output_tokens_details", None)
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=getattr(output_details, "reasoning_tokens", 0) or 0,
        cached_tokens=getattr(input_details, "cached_tokens", 0) or 0,
        by=by,
        bills=bills,
        teaches=teaches,
    )


def stopped_at_cap(response: Any) -> bool:
    """Whether a response ended incomplete at its ``max_output_tokens``."""
    details = getattr(response, "incomplete_details", None)
    return (
        getattr(response, "status", None) == "incomplete"
        and getattr(details, "reason", None) == "max_output_tokens"
    )


def input_items(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Messages as the Responses API's easy input items (``{"role", "content"}``)."""
    return [{"role": m.role, "content": m.content} for m in messages]


class OpenAIResponsesBackend(SDKClientRetries):
    """Talks to ``client.responses``; any ``openai.OpenAI`` client will do.

    SDK errors are re-raised as ``ModelServerError`` (a BackendError) with a
    message safe to show: the client's API key never appears in it.

    ``profile`` describes the server: OpenAI itself by default, where the summary
    goes as the article's ``developer`` message and local o200k_base counts are the
    server's. A proxy over a local model (LiteLLM, say) may forward that message as
    a second system message, which many chat templates drop, and may count with
    another tokenizer: ``PROXY_PROFILE`` then asks for a single system message
    and for the gap to be learned.
    """

    offline = False

    def __init__(
        self,
        client: openai.OpenAI,
        label: str = "OpenAI Responses",
        profile: ServerProfile = OPENAI_PROFILE,
        *,
        count_remotely: bool = False,
    ) -> None:
        """``count_remotely``: count each request with ``responses.input_tokens.count`` before it is
        sent, as the article does (``MEMORA_TOKEN_COUNTING=api``): a network call a request, where
        o200k_base counts OpenAI's way locally."""
        self.client = client
        self.label = label
        self.profile = profile
        self.count_remotely = count_remotely

    # -- request bodies ---------------------------------------------------------

    @staticmethod
    def reply_params(request: ReplyRequest) -> dict[str, Any]:
        """The body of a streamed reply request, capped when the request has a cap."""
        params: dict[str, Any] = {
            "model": request.model,
            "instructions": request.instructions,
            "input": input_items(request.messages),
            "stream": True,
        }
        if request.max_output_tokens is not None:
            params["max_output_tokens"] = output_cap(request.model, request.max_output_tokens)
        return params

    @staticmethod
    def summary_params(request: SummaryRequest) -> dict[str, Any]:
        """The body of a summary request, bounded by ``max_output_tokens``.

        Reasoning models get ``REASONING_ALLOWANCE`` more and low effort, since
        their reasoning counts against the same limit; the memory truncates the text.
        """
        params: dict[str, Any] = {
            "model": request.model,
            "instructions": request.instructions,
            "input": request.input_text,
            "max_output_tokens": output_cap(request.model, request.max_output_tokens),
        }
        if is_reasoning_model(request.model):
            params["reasoning"] = {"effort": "low"}
        return params

    @staticmethod
    def count_params(model: str, instructions: str, messages: Sequence[Message]) -> dict[str, Any]:
        return {"model": model, "instructions": instructions, "input": input_items(messages)}

    # -- the Backend protocol -----------------------------------------------------

    @staticmethod
    def billed_output_cap(model: str, max_output_tokens: int) -> int:
        """The most output tokens a request capped at ``max_output_tokens`` may be billed: a
        reasoning model's thinking too."""
        return output_cap(model, max_output_tokens)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        """Yields text deltas, then one Completion whose usage is the final event's.

        ``response.incomplete`` (the output limit, a content filter) still completes
        the turn with the text received. ``response.failed`` and ``error`` events,
        and a stream that ends or breaks before its final event, raise ModelServerError.
        """
        parts: list[str] = []
        opened = started = False
        try:
            with self.client.responses.create(**self.reply_params(request)) as stream:
                opened = True  # the SDK retried what failed before this; nothing after it
                for event in stream:
                    started = True
                    if event.type in _TEXT_DELTAS:
                        parts.append(event.delta)
                        yield event.delta
                    elif event.type in _FINAL:
                        text = "".join(parts)
                        # A proxy's streamed usage may be its own estimate (LiteLLM 1.108): shown,
                        # never learned from.
                        usage = usage_of(
                            event.response.usage,
                            self._estimate(request, text),
                            **self._reporter(streamed=True),
                        )
                        yield Completion(text, usage, cut=stopped_at_cap(event.response))
                        return
                    elif event.type == "response.failed":
                        raise self._failed(getattr(event.response, "error", None))
                    elif event.type == "error":
                        raise self._failed(event)
        except openai.OpenAIError as error:
            raise self._explain(error, during_stream=started, answer_began=opened) from None
        raise stream_ended_early()

    def summarize(self, request: SummaryRequest) -> Completion:
        try:
            response = self.client.responses.create(**self.summary_params(request))
        except openai.OpenAIError as error:
            raise self._explain(error) from None
        text = response.output_text
        # With no usage reported, the estimate is the count the memory checked the request by, not
        # its two texts alone.
        estimate = Usage(
            summary_request_tokens(request.instructions, request.input_text),
            count_text(text),
            estimated=True,
        )
        return Completion(
            text,
            usage_of(response.usage, estimate, **self._reporter(streamed=False)),
            cut=stopped_at_cap(response),
        )

    def count_request(
        self, model: str, instructions: str, messages: Sequence[Message]
    ) -> int | None:
        """The server's count of this request's input (``responses.input_tokens.count``) where
        ``count_remotely``, a BackendError when it fails; None otherwise: OpenAI bills with
        o200k_base, the memory's own local count."""
        if not self.count_remotely:
            return None
        try:
            counted = self.client.responses.input_tokens.count(
                **self.count_params(model, instructions, messages)
            )
        except openai.OpenAIError as error:
            raise self._explain(error) from None
        return counted.input_tokens

    def counting_source(self, model: str) -> str | None:
        return "OpenAI responses.input_tokens.count" if self.count_remotely else None

    # -- helpers ------------------------------------------------------------------

    def _reporter(self, *, streamed: bool) -> dict[str, Any]:
        """Whose usage this server's figures are: OpenAI bills by them; a proxy only reports
        them."""
        if self.profile.counts_like_o200k:
            return {"by": "OpenAI", "bills": True}
        return {"by": "the proxy", "bills": False, "teaches": not streamed}

    def _estimate(self, request: ReplyRequest, text: str) -> Usage:
        counted = LocalTokenCounter().count(request.model, request.instructions, request.messages)
        return Usage(counted, count_text(text), estimated=True)

    def _explain(
        self, error: Exception, during_stream: bool = False, answer_began: bool = False
    ) -> BackendError:
        return explain_error(
            error, secrets=(self._key(),), during_stream=during_stream, answer_began=answer_began
        )

    def _failed(self, error: Any) -> ModelServerError:
        detail = getattr(error, "message", None) or "no details"
        return ModelServerError(
            "The model reported an error while answering: "
            f"{redact(str(detail), (self._key(),))[:300]}",
            "stream",
        )

    def _key(self) -> str | None:
        key = getattr(self.client, "api_key", None)
        return key if isinstance(key, str) else None
