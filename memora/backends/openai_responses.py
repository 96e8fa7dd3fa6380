"""OpenAI's Responses API: streaming replies, bounded summaries, server-side counting."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import openai

from memora.backends.base import BackendError, Completion, ReplyRequest, SummaryRequest
from memora.messages import Message
from memora.usage import Usage

# Reasoning models spend part of max_output_tokens on reasoning before any text.
# The summary's text is bounded by the memory itself; this is headroom for thought.
REASONING_ALLOWANCE = 2048
_REASONING_MODEL = re.compile(r"^(gpt-5|o\d)")
_SECRET = re.compile(r"(sk-|Bearer\s+)[\w\-*.]+")


def is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL.match(model))


def redact(text: str) -> str:
    """Removes anything shaped like an API key or bearer token."""
    return _SECRET.sub(r"\1[redacted]", text)


def explain_error(error: Exception) -> BackendError:
    """A user-facing BackendError for an SDK error; never includes the key."""
    match error:
        case openai.AuthenticationError():
            return BackendError("The model server rejected the API key (HTTP 401). Check OPENAI_API_KEY.")
        case openai.RateLimitError():
            return BackendError("The model server is rate-limiting or out of quota (HTTP 429). Wait a moment and resend.")
        case openai.APITimeoutError():
            return BackendError("The model server did not answer in time. Resend, or raise MEMORA_TIMEOUT.")
        case openai.APIConnectionError():
            return BackendError("Could not connect to the model server. Check the network and OPENAI_BASE_URL.")
        case openai.InternalServerError() | openai.APIStatusError() if getattr(error, "status_code", 0) >= 500:
            return BackendError(f"The model server failed (HTTP {error.status_code}). Resend in a moment.")
        case openai.APIStatusError():
            return BackendError(f"The model server refused the request (HTTP {error.status_code}): {redact(error.message)}")
        case _:
            return BackendError(redact(f"The model request failed: {error}"))


def usage_of(usage: Any) -> Usage:
    """Reads a Responses ``usage`` object; a missing one gives zeros marked as estimated."""
    if usage is None:
        return Usage(0, 0, estimated=True)
    input_details = getattr(usage, "input_tokens_details", None)
    output_details = getattr(usage, "output_tokens_details", None)
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=getattr(output_details, "reasoning_tokens", 0) or 0,
        cached_tokens=getattr(input_details, "cached_tokens", 0) or 0,
    )


class OpenAIResponsesBackend:
    """Talks to ``client.responses``; any ``openai.OpenAI`` client will do.

    SDK errors are re-raised as BackendError with a message safe to show.
    """

    offline = False

    def __init__(self, client: openai.OpenAI, label: str = "OpenAI Responses") -> None:
        self.client = client
        self.label = label

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        parts: list[str] = []
        try:
            stream = self.client.responses.create(
                model=request.model,
                instructions=request.instructions,
                input=list(request.messages),
                stream=True,
            )
            with stream:
                for event in stream:
                    if event.type == "response.output_text.delta":
                        parts.append(event.delta)
                        yield event.delta
                    elif event.type in ("response.completed", "response.incomplete"):
                        yield Completion("".join(parts), usage_of(event.response.usage))
                        return
                    elif event.type in ("response.failed", "error"):
                        raise BackendError("The model reported an error while answering. Resend in a moment.")
        except openai.OpenAIError as error:
            raise explain_error(error) from None
        raise BackendError("The model's stream ended before the response was complete.")

    def summarize(self, request: SummaryRequest) -> Completion:
        options: dict[str, Any] = {"max_output_tokens": request.max_output_tokens}
        if is_reasoning_model(request.model):
            options = {"max_output_tokens": request.max_output_tokens + REASONING_ALLOWANCE, "reasoning": {"effort": "low"}}
        try:
            response = self.client.responses.create(
                model=request.model,
                instructions=request.instructions,
                input=request.input_text,
                **options,
            )
        except openai.OpenAIError as error:
            raise explain_error(error) from None
        return Completion(response.output_text, usage_of(response.usage))

    def count_input_tokens(self, model: str, instructions: str, messages: Sequence[Message]) -> int:
        try:
            counted = self.client.responses.input_tokens.count(model=model, instructions=instructions, input=list(messages))
        except openai.OpenAIError as error:
            raise explain_error(error) from None
        return counted.input_tokens
