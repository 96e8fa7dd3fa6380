"""User-safe messages for the openai SDK's errors, shared by both SDK backends.

The SDK retries connection failures, 408, 409, 429 and 5xx itself (``max_retries``),
so an error that reaches these functions has already been retried.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx2
import openai

from memora.backends.redaction import redact
from memora.memory.backend import BackendError, ContextOverflowError

__all__ = ["ModelServerError", "context_overflow", "explain_error", "stream_ended_early"]

_MAX_SERVER_TEXT = 300


class ModelServerError(BackendError):
    """A BackendError with its cause's class: ``kind`` is one of ``auth``, ``rate_limit``,
    ``timeout``, ``connection``, ``interrupted``, ``server``, ``refused``, ``stream``, ``other``.

    ``status_code`` is the HTTP status when the server answered, else None. ``sent`` is False only
    when the request never left (the connection was refused or never made): a request sent and not
    answered (a timeout, a broken connection) may still be billed by a server that answered after
    the client stopped waiting. ``began`` is True when a streamed answer had begun (its status and
    headers had come) before the failure: the openai SDK retries a request only before that, and so
    does ``memora.classroom.guard``.
    """

    def __init__(
        self,
        message: str,
        kind: str,
        status_code: int | None = None,
        *,
        sent: bool = True,
        began: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code
        self.sent = sent
        self.began = began


_OVERFLOW = re.compile(
    r"exceed(?:s)? (?:the )?"
    r"(?:context window|(?:the )?available context size|maximum context length)"
    r"|maximum context length is|context_length_exceeded|input length exceeds"
    r"|exceeds the context window"
    r"|input exceeds the context window|prompt is too long",
    re.IGNORECASE,
)
_PROMPT_FIGURES = (
    re.compile(r"Requested tokens \((\d+)\)"),  # llama-cpp-python: the prompt alone
    re.compile(r"request \((\d+) tokens\) exceeds", re.IGNORECASE),  # llama.cpp's server
    re.compile(
        r"\((\d+) in the messages", re.IGNORECASE
    ),  # vLLM: "you requested N tokens (P in the messages, C in the completion)"
    re.compile(r"your request has (\d+) input tokens", re.IGNORECASE),  # vLLM, newer
    re.compile(r"messages resulted in (\d+) tokens", re.IGNORECASE),  # OpenAI Chat Completions
)
_WINDOW_FIGURES = (
    re.compile(r"context window of (\d+)", re.IGNORECASE),
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE),
)


def context_overflow(text: str, status_code: int | None = 400) -> ContextOverflowError | None:
    """A ContextOverflowError when ``text`` (a server's error message) says the request overflowed
    its context, with the figures it carries (llama.cpp, llama-cpp-python, vLLM, Ollama, OpenAI);
    else None."""
    if not _OVERFLOW.search(text):
        return None

    def first(patterns: tuple[re.Pattern[str], ...]) -> int | None:
        for pattern in patterns:
            if match := pattern.search(text):
                return int(match.group(1))
        return None

    return ContextOverflowError(
        "The request was longer than the model server's context window.",
        first(_PROMPT_FIGURES),
        first(_WINDOW_FIGURES),
        status_code,
    )


def explain_error(
    error: Exception,
    *,
    key_name: str = "OPENAI_API_KEY",
    url_name: str = "OPENAI_BASE_URL",
    secrets: Iterable[str | None] = (),
    during_stream: bool = False,
    answer_began: bool = False,
) -> ModelServerError:
    """A user-facing error for an SDK error; never includes the key.

    ``key_name`` and ``url_name`` are the settings a user should check. ``during_stream`` says that
    part of the reply had already arrived: a broken connection then reads as an interrupted reply,
    not as a server out of reach. ``answer_began`` says that the streamed answer had begun (its
    headers came), even before its first event: a timeout or a broken connection then has ``began``
    set, since the SDK retries neither.
    """
    secrets = tuple(secrets)
    match error:
        case openai.AuthenticationError():
            return ModelServerError(
                f"The model server rejected the API key (HTTP 401). Check {key_name}.", "auth", 401
            )
        case openai.PermissionDeniedError():
            return ModelServerError(
                f"The model server refused access for this key (HTTP 403). Check {key_name} and "
                "the model's access.",
                "auth",
                403,
            )
        case openai.RateLimitError():
            return ModelServerError(
                "The model server is rate-limiting or out of quota (HTTP 429). Wait a moment and "
                "resend.",
                "rate_limit",
                429,
            )
        case openai.APITimeoutError():
            return ModelServerError(
                "The model server did not answer in time. Resend, or raise MEMORA_TIMEOUT.",
                "timeout",
                sent=_sent(error),
                began=answer_began,
            )
        case openai.APIConnectionError() if during_stream:
            return ModelServerError(
                "The connection to the model server broke off in the middle of the reply. Nothing "
                "was saved; resend.",
                "interrupted",
                began=True,
            )
        case openai.APIConnectionError():
            return ModelServerError(
                f"Could not connect to the model server. Check the network and {url_name}.",
                "connection",
                sent=_sent(error),
                began=answer_began,
            )
        case openai.APIStatusError() if error.status_code >= 500:
            return ModelServerError(
                f"The model server failed (HTTP {error.status_code}). Resend in a moment.",
                "server",
                error.status_code,
            )
        case openai.APIStatusError() if (
            overflow := context_overflow(_error_text(error), error.status_code)
        ) is not None:
            return overflow
        case openai.APIStatusError():
            detail = redact(error.message, secrets)[:_MAX_SERVER_TEXT]
            return ModelServerError(
                f"The model server refused the request (HTTP {error.status_code}): {detail}",
                "refused",
                error.status_code,
            )
        case openai.APIError():
            detail = redact(error.message, secrets)[:_MAX_SERVER_TEXT]
            return ModelServerError(f"The model server reported an error: {detail}", "stream")
        case _:
            return ModelServerError(
                redact(f"The model request failed: {error}", secrets)[:_MAX_SERVER_TEXT], "other"
            )


def _sent(error: openai.APIConnectionError) -> bool:
    """Whether the request may have reached the server: not when connecting failed (the SDK's
    cause)."""
    return not isinstance(error.__cause__, httpx2.ConnectError | httpx2.ConnectTimeout)


def _error_text(error: openai.APIStatusError) -> str:
    """The error's message and its body's code, where an overflow is named (OpenAI:
    ``context_length_exceeded``)."""
    body = error.body if isinstance(error.body, dict) else {}
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    return f"{error.message} {inner.get('code') or ''} {inner.get('type') or ''}"


def stream_ended_early() -> ModelServerError:
    """The stream closed cleanly but before the model's final event."""
    return ModelServerError(
        "The model's stream ended before the reply was complete. Nothing was saved; resend.",
        "interrupted",
    )
