"""Settings from environment variables and Streamlit secrets; no Streamlit import here.

Precedence, highest first: Streamlit secrets, then the environment, then defaults.
The page passes ``st.secrets`` in as a plain mapping.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, MAX_RECENT_TURNS

BackendName = Literal["offline", "openai"]
BACKENDS: tuple[BackendName, ...] = ("offline", "openai")


@dataclass(frozen=True)
class Settings:
    """Everything needed to build a memory and its backend.

    ``backend`` is ``"offline"`` unless a key is configured or asked for.
    ``api_key`` never appears in ``repr`` and is never logged.
    """

    backend: BackendName = "offline"
    model: str = DEFAULT_MODEL
    max_input_tokens: int = MAX_INPUT_TOKENS
    max_recent_turns: int = MAX_RECENT_TURNS
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None

    @property
    def has_key(self) -> bool:
        return bool(self.api_key)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)


class SettingsError(ValueError):
    """A configured value is malformed; the message names the variable."""


def _int(name: str, raw: Any) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a whole number, not {raw!r}") from None


def load_settings(secrets: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``MEMORA_BACKEND``, ``MEMORA_MODEL``,
    ``MEMORA_MAX_INPUT_TOKENS`` and ``MEMORA_MAX_RECENT_TURNS``.

    With a key and no ``MEMORA_BACKEND``, the backend is ``openai``; without a
    key it is ``offline``. Raises SettingsError for a malformed value.
    """
    secrets = secrets or {}
    environ = os.environ if environ is None else environ

    def get(name: str) -> Any:
        value = secrets.get(name)
        return value if value not in (None, "") else environ.get(name) or None

    api_key = get("OPENAI_API_KEY")
    backend = get("MEMORA_BACKEND") or ("openai" if api_key else "offline")
    if backend not in BACKENDS:
        raise SettingsError(f"MEMORA_BACKEND must be one of {', '.join(BACKENDS)}, not {backend!r}")
    defaults = Settings()
    return Settings(
        backend=backend,
        model=get("MEMORA_MODEL") or defaults.model,
        max_input_tokens=_int("MEMORA_MAX_INPUT_TOKENS", get("MEMORA_MAX_INPUT_TOKENS") or defaults.max_input_tokens),
        max_recent_turns=_int("MEMORA_MAX_RECENT_TURNS", get("MEMORA_MAX_RECENT_TURNS") or defaults.max_recent_turns),
        api_key=api_key,
        base_url=get("OPENAI_BASE_URL"),
    )


def build_backend(settings: Settings):  # -> memora.backends.Backend
    """The backend the settings select. Raises SettingsError for openai without a key."""
    from memora.backends import OfflineBackend

    if settings.backend == "offline":
        return OfflineBackend()
    if not settings.api_key:
        raise SettingsError("The openai backend needs OPENAI_API_KEY (environment, secrets, or the page's key field).")
    import openai

    from memora.backends.openai_responses import OpenAIResponsesBackend

    return OpenAIResponsesBackend(openai.OpenAI(api_key=settings.api_key, base_url=settings.base_url))
