"""User-safe messages for the openai SDK's errors, shared by both SDK backends.

The SDK retries connection failures, 408, 409, 429 and 5xx itself (``max_retries``),
so an error that reaches these functions has already been retried.
"""

from __future__ import annotations

from collections.abc import Iterable

import openai

from memora.backends.base import BackendError
from memora.redaction import MIN_SECRET_RUN, redact, url_secrets

__all__ = ["MIN_SECRET_RUN", "ModelServerError", "explain_error", "redact", "stream_ended_early", "url_secrets"]

_MAX_SERVER_TEXT = 300


class ModelServerError(BackendError):
    """A BackendError with its cause's class: ``kind`` is one of ``auth``, ``rate_limit``,
    ``timeout``, ``connection``, ``interrupted``, ``server``, ``refused``, ``stream``, ``other``.

    ``status_code`` is the HTTP status when the server answered, else None.
    """

    def __init__(self, message: str, kind: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code


def explain_error(
    error: Exception,
    *,
    key_name: str = "OPENAI_API_KEY",
    url_name: str = "OPENAI_BASE_URL",
    secrets: Iterable[str | None] = (),
    during_stream: bool = False,
) -> ModelServerError:
    """A user-facing error for an SDK error; never includes the key.

    ``key_name`` and ``url_name`` are the settings a user should check.
    ``during_stream`` says that part of the reply had already arrived: a broken
    connection then reads as an interrupted reply, not as a server out of reach.
    """
    secrets = tuple(secrets)
    match error:
        case openai.AuthenticationError():
            return ModelServerError(f"The model server rejected the API key (HTTP 401). Check {key_name}.", "auth", 401)
        case openai.PermissionDeniedError():
            return ModelServerError(
                f"The model server refused access for this key (HTTP 403). Check {key_name} and the model's access.", "auth", 403
            )
        case openai.RateLimitError():
            return ModelServerError(
                "The model server is rate-limiting or out of quota (HTTP 429). Wait a moment and resend.", "rate_limit", 429
            )
        case openai.APITimeoutError():
            return ModelServerError("The model server did not answer in time. Resend, or raise MEMORA_TIMEOUT.", "timeout")
        case openai.APIConnectionError() if during_stream:
            return ModelServerError(
                "The connection to the model server broke off in the middle of the reply. Nothing was saved; resend.",
                "interrupted",
            )
        case openai.APIConnectionError():
            return ModelServerError(f"Could not connect to the model server. Check the network and {url_name}.", "connection")
        case openai.APIStatusError() if error.status_code >= 500:
            return ModelServerError(f"The model server failed (HTTP {error.status_code}). Resend in a moment.", "server", error.status_code)
        case openai.APIStatusError():
            detail = redact(error.message, secrets)[:_MAX_SERVER_TEXT]
            return ModelServerError(
                f"The model server refused the request (HTTP {error.status_code}): {detail}", "refused", error.status_code
            )
        case openai.APIError():
            detail = redact(error.message, secrets)[:_MAX_SERVER_TEXT]
            return ModelServerError(f"The model server reported an error: {detail}", "stream")
        case _:
            return ModelServerError(redact(f"The model request failed: {error}", secrets)[:_MAX_SERVER_TEXT], "other")


def stream_ended_early() -> ModelServerError:
    """The stream closed cleanly but before the model's final event."""
    return ModelServerError("The model's stream ended before the reply was complete. Nothing was saved; resend.", "interrupted")
