"""Settings from environment variables and Streamlit secrets; no Streamlit import here.

Precedence, highest first: Streamlit secrets, then the environment, then defaults.
The page passes ``st.secrets`` in as a plain mapping, and may change a loaded
``Settings`` with ``with_changes`` (its own widgets); ``build_backend`` then builds
the same backend whichever way it was chosen.

Variables (each may also be a key in ``.streamlit/secrets.toml``):

- ``MEMORA_BACKEND``: ``offline``, ``openai`` (the Responses API) or ``chat`` (any
  OpenAI-compatible Chat Completions server). Default: ``openai`` when
  OPENAI_API_KEY is set, else ``offline``.
- ``OPENAI_API_KEY``: the OpenAI key; used by the ``openai`` backend only, so it is
  never sent to another server.
- ``MEMORA_BASE_URL``, else ``OPENAI_BASE_URL``: the server's URL, ending in ``/v1``
  (Ollama: ``http://localhost:11434/v1``). Required by ``chat``; for ``openai`` it
  points the Responses API at a proxy or another endpoint (default: OpenAI's).
- ``MEMORA_API_KEY``: the ``chat`` server's key, if it needs one.
- ``MEMORA_MODEL``: the model. Default ``gpt-5-mini`` for ``openai``; required by ``chat``.
- ``MEMORA_TOKEN_COUNTING``: ``local`` (o200k_base, no network; default) or ``api``
  (``responses.input_tokens.count``; ``openai`` backend only). A ``chat`` server with its own
  tokenizer endpoint (llama.cpp, llama-cpp-python, vLLM) counts each request itself, whatever this
  says: ``ChatCompletionsBackend`` probes for one (``memora.backends.server_tokenizer``).
- ``MEMORA_TIMEOUT``: seconds to wait for the server's answer, and between streamed
  bytes; default 120 (a reasoning model may think a while before its first word).
  Connecting is given at most 5 seconds.
- ``MEMORA_MAX_RETRIES``: the SDK's retries on connection errors, 408, 409, 429 and
  5xx, with backoff; default 2.
- ``MEMORA_MAX_INPUT_TOKENS``, ``MEMORA_MAX_RECENT_TURNS``: the memory's limits.
- ``MEMORA_MAX_REPLY_TOKENS``: the output cap of one reply; default 1,000. A reply
  stopped there is kept and marked as cut.
- ``MEMORA_FOLD_POLICY``: ``window`` (the article's rule: from the turn after the recent
  window is full, its oldest pair is folded; the default, since it is the lesson the page
  teaches) or ``watermark`` (fold when a request would pass the window-only request plus
  600 tokens, never over the budget; then every pair older than the window at once:
  fewer, larger summaries, under the same summary cap).
- ``MEMORA_CONTEXT_WINDOW``: the server's context size in tokens (llama.cpp's
  ``--n_ctx``), when known; the budget plus the largest output must fit in it.

For a shared classroom link (see docs/classroom.md):

- ``MEMORA_LOCK_SETTINGS``: ``true`` locks backend, model, key, budget and window
  for every session: the page hides or disables their widgets, and its callbacks
  refuse changes even when a request claims otherwise. Default ``false``.
- ``MEMORA_MAX_MESSAGE_CHARS``: characters one message may have; default 20,000.
- ``MEMORA_MAX_TURNS``: finished turns per session; unset means no cap.
- ``MEMORA_MAX_SESSION_TOKENS``: tokens (the session's ledger total) per session,
  checked before each turn; unset means no cap.
- ``MEMORA_MAX_SERVER_TOKENS``: tokens every session on this server may spend
  together (reply, summary and prefold requests), checked before each request
  and kept across restarts; unset means no cap and no file.
- ``MEMORA_DATA_DIR``: where that shared spend is kept (``usage.sqlite3``), and the default
  conversation store (``conversations.sqlite3``); default ``~/.memora``, created on first use.

Conversation persistence (``memora.store``; see docs/postgresql.md):

- ``MEMORA_STORE_URL``: where each conversation is kept under its id, so that a reload or a
  restart brings it back: ``sqlite:///path`` (default: ``conversations.sqlite3`` under
  ``MEMORA_DATA_DIR``), ``postgresql://user:password@host:5432/db`` (shared by several
  processes, and then the server-wide budget is kept there too), or ``off``.
- ``MEMORA_CONVERSATION_IDLE_DAYS``: conversations not saved for longer are deleted (checked
  hourly); default 30.
- ``MEMORA_MAX_CONVERSATION_KB``: the saved size of one conversation (history, summary versions,
  ledger and last context), in KiB; default 1,024, at most 8,192. At the cap the conversation stays as
  last saved and the page refuses its next message.
- ``MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR``: conversations one browser may start in an hour (new ones
  from their first reply, imports and forks); default 20.
- ``MEMORA_MAX_STORE_MB``: every saved conversation together, in MiB; default 1,024.
- ``MEMORA_SHUTDOWN_GRACE_S``: when the server is stopped (SIGTERM, Ctrl-C), how long the replies
  being written may take to finish and be saved; default 5 (``memora.replies.shutdown``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from memora.classroom.server_budget import DEFAULT_DATA_DIR, ServerLedger
from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, MAX_RECENT_TURNS, MAX_REPLY_TOKENS, FoldPolicy, ShortTermMemory, policies
from memora.memory.limits import DEFAULT_MAX_MESSAGE_CHARS, SessionLimits
from memora.store import StoreCaps, StoreURLError, check_store_url, default_store_url, is_postgres
from memora.store.saved import MAX_SAVED_BYTES

if TYPE_CHECKING:
    from memora.backends.base import Backend
    from memora.classroom.postgres_ledger import PostgresServerLedger
    from memora.tokens import TokenCounter

BackendName = Literal["offline", "openai", "chat"]
BACKENDS: tuple[BackendName, ...] = ("offline", "openai", "chat")
BACKEND_LABELS: dict[BackendName, str] = {
    "offline": "Offline (no language model)",
    "openai": "OpenAI (Responses API)",
    "chat": "OpenAI-compatible server (Ollama, LM Studio, vLLM, llama.cpp)",
}
FOLD_POLICIES: tuple[FoldPolicy, ...] = policies.names()  # the registry's, the default first: the page's radio lists them so
TokenCounting = Literal["local", "api"]
TOKEN_COUNTING: tuple[TokenCounting, ...] = ("local", "api")
DEFAULT_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 5.0
"""The SDK's own connect timeout: an unreachable server is reported in seconds, not minutes."""
DEFAULT_MAX_RETRIES = 2
DEFAULT_CONVERSATION_IDLE_DAYS = 30
DEFAULT_MAX_CONVERSATION_KB = 1024
"""1 MiB: about 400 short turns (250 KiB at 100 turns, summary versions included: benchmarks/conversation_save.py),
ten times a classroom's 40-turn cap; a file padded to an import's 2 MiB, its bulk in the last context, is refused."""
DEFAULT_MAX_NEW_CONVERSATIONS_PER_HOUR = 20
DEFAULT_MAX_STORE_MB = 1024
DEFAULT_SHUTDOWN_GRACE_S = 5.0
"""Long enough for most replies under way (a 1,000-token cap streams in 5-15 s from a hosted model, and a reply is
usually part-way), yet, with ``memora.replies.shutdown.UNWIND_S`` after it, under the 10 s that ``docker stop`` waits before
SIGKILL, which would keep nothing at all. systemd (90 s) and Kubernetes (30 s) allow a longer grace."""


@dataclass(frozen=True)
class Settings:
    """Everything needed to build a memory and its backend.

    ``backend`` is ``"offline"`` unless a key is configured or asked for.
    ``api_key`` is the OpenAI key (``openai`` backend); ``chat_api_key`` is the
    OpenAI-compatible server's (``chat`` backend). Neither appears in ``repr``;
    neither is ever logged.
    """

    backend: BackendName = "offline"
    model: str = DEFAULT_MODEL
    max_input_tokens: int = MAX_INPUT_TOKENS
    max_recent_turns: int = MAX_RECENT_TURNS
    max_reply_tokens: int = MAX_REPLY_TOKENS
    context_window: int | None = None
    fold_policy: FoldPolicy = "window"
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    chat_api_key: str | None = field(default=None, repr=False)
    token_counting: TokenCounting = "local"
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    locked: bool = False
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    max_turns: int | None = None
    max_session_tokens: int | None = None
    max_server_tokens: int | None = None
    data_dir: str = DEFAULT_DATA_DIR
    store_url: str | None = field(default=None, repr=False)  # a PostgreSQL URL may hold a password
    conversation_idle_days: int = DEFAULT_CONVERSATION_IDLE_DAYS
    max_conversation_kb: int = DEFAULT_MAX_CONVERSATION_KB
    max_new_conversations_per_hour: int = DEFAULT_MAX_NEW_CONVERSATIONS_PER_HOUR
    max_store_mb: int = DEFAULT_MAX_STORE_MB
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S

    @property
    def store_caps(self) -> StoreCaps:
        """What the conversation store keeps at most (``memora.store.base.StoreCaps``), in bytes and conversations."""
        return StoreCaps(self.max_conversation_kb * 1024, self.max_new_conversations_per_hour, self.max_store_mb * 1024 * 1024)

    @property
    def conversation_store_url(self) -> str:
        """``store_url``, or the default SQLite file under ``data_dir``."""
        return self.store_url or default_store_url(self.data_dir)

    @property
    def server_ledger(self) -> ServerLedger | PostgresServerLedger | None:
        """The server-wide spend and its cap, or None when ``MEMORA_MAX_SERVER_TOKENS`` is unset; in PostgreSQL
        when the conversation store is there, so that every process sharing the store shares the budget."""
        if self.max_server_tokens is None:
            return None
        if is_postgres(self.store_url):
            from memora.classroom.postgres_ledger import PostgresServerLedger

            return PostgresServerLedger(str(self.store_url), self.max_server_tokens)
        return ServerLedger.in_dir(self.data_dir, self.max_server_tokens)

    @property
    def redacted_secrets(self) -> tuple[str, ...]:
        """Every secret these settings hold, in each form it may be shown in: both keys, and the password of
        the store's URL and of the server's URL (as written, percent-decoded and encoded); for ``redact``."""
        from memora.backends.redaction import url_secrets

        keys = tuple(key for key in (self.api_key, self.chat_api_key) if key)
        return keys + url_secrets(self.store_url) + url_secrets(self.base_url)

    @property
    def limits(self) -> SessionLimits:
        """The per-session caps, for ``ShortTermMemory(limits=...)``."""
        return SessionLimits(self.max_message_chars, self.max_turns, self.max_session_tokens)

    @property
    def has_key(self) -> bool:
        """Whether an OpenAI key is set (the ``chat`` server's key is ``chat_api_key``)."""
        return bool(self.api_key)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)


class SettingsError(ValueError):
    """A configured value is malformed or missing; the message names the variable."""


def _int(name: str, raw: Any, minimum: int) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, not {value}")
    return value


def _seconds(name: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise SettingsError(f"{name} must be more than 0 seconds, not {raw!r}")
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(name: str, raw: Any) -> bool:
    if raw is None or isinstance(raw, bool):
        return bool(raw)
    text = str(raw).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise SettingsError(f"{name} must be true or false, not {raw!r}")


def _choice(name: str, raw: Any, choices: tuple[str, ...]) -> str:
    value = str(raw).strip().lower()
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {raw!r}")
    return value


def _cap(name: str, raw: Any) -> int | None:
    return None if raw is None else _int(name, raw, 1)


def _first(value: Any, default: Any) -> Any:
    # "0" is a valid setting here, so ``or`` would not do.
    return default if value is None else value


def _backend_and_counting(get: Callable[[str], Any], api_key: str | None) -> tuple[str, str]:
    """``MEMORA_BACKEND`` (``openai`` with a key, else ``offline``) and ``MEMORA_TOKEN_COUNTING``, checked together."""
    backend = str(get("MEMORA_BACKEND") or ("openai" if api_key else "offline")).lower()
    if backend not in BACKENDS:
        raise SettingsError(f"MEMORA_BACKEND must be one of {', '.join(BACKENDS)}, not {backend!r}")
    counting = str(get("MEMORA_TOKEN_COUNTING") or "local").lower()
    if counting not in TOKEN_COUNTING:
        raise SettingsError(f"MEMORA_TOKEN_COUNTING must be one of {', '.join(TOKEN_COUNTING)}, not {counting!r}")
    if counting == "api" and backend != "openai":
        raise SettingsError("MEMORA_TOKEN_COUNTING=api needs MEMORA_BACKEND=openai; other servers have no count endpoint.")
    return backend, counting


def load_settings(secrets: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Reads the variables listed in this module's docstring, secrets first.

    An empty value counts as unset. With a key and no ``MEMORA_BACKEND`` the
    backend is ``openai``; without a key it is ``offline``.
    Raises SettingsError for a malformed value, an unknown backend or counting
    mode, ``chat`` without a base URL or model, and ``api`` counting without ``openai``.
    """
    secrets = secrets or {}
    environ = os.environ if environ is None else environ

    def get(name: str) -> Any:
        value = secrets.get(name)
        if value not in (None, ""):
            return str(value).strip() if isinstance(value, str) else value
        return (environ.get(name) or "").strip() or None

    return Settings(**_model_settings(get), **_classroom_settings(get))


Getter = Callable[[str], Any]


def _model_settings(get: Getter) -> dict[str, Any]:
    """The backend, the model and the memory's own limits; raises SettingsError as ``load_settings`` says."""
    api_key = get("OPENAI_API_KEY")
    backend, counting = _backend_and_counting(get, api_key)
    base_url = get("MEMORA_BASE_URL") or get("OPENAI_BASE_URL")
    model = get("MEMORA_MODEL")
    if backend == "chat":
        if not base_url:
            raise SettingsError(
                "MEMORA_BACKEND=chat needs MEMORA_BASE_URL, the server's URL ending in /v1 (Ollama: http://localhost:11434/v1)."
            )
        if not model:
            raise SettingsError("MEMORA_BACKEND=chat needs MEMORA_MODEL, a model the server has (Ollama: llama3.2).")
    defaults = Settings()
    return {
        "backend": backend,
        "model": model or defaults.model,
        "max_input_tokens": _int("MEMORA_MAX_INPUT_TOKENS", get("MEMORA_MAX_INPUT_TOKENS") or defaults.max_input_tokens, 1),
        "max_recent_turns": _int("MEMORA_MAX_RECENT_TURNS", _first(get("MEMORA_MAX_RECENT_TURNS"), defaults.max_recent_turns), 0),
        "max_reply_tokens": _int("MEMORA_MAX_REPLY_TOKENS", get("MEMORA_MAX_REPLY_TOKENS") or defaults.max_reply_tokens, 1),
        "context_window": _cap("MEMORA_CONTEXT_WINDOW", get("MEMORA_CONTEXT_WINDOW")),
        "fold_policy": _choice("MEMORA_FOLD_POLICY", get("MEMORA_FOLD_POLICY") or defaults.fold_policy, FOLD_POLICIES),
        "api_key": api_key,
        "base_url": base_url,
        "chat_api_key": get("MEMORA_API_KEY"),
        "token_counting": counting,
        "timeout_s": _seconds("MEMORA_TIMEOUT", get("MEMORA_TIMEOUT") or defaults.timeout_s),
        "max_retries": _int("MEMORA_MAX_RETRIES", _first(get("MEMORA_MAX_RETRIES"), defaults.max_retries), 0),
    }


def _classroom_settings(get: Getter) -> dict[str, Any]:
    """The lock, the caps per conversation and per server, the store and its caps, and the shutdown grace."""
    defaults = Settings()
    return {
        "locked": _flag("MEMORA_LOCK_SETTINGS", get("MEMORA_LOCK_SETTINGS")),
        "max_message_chars": _int("MEMORA_MAX_MESSAGE_CHARS", get("MEMORA_MAX_MESSAGE_CHARS") or defaults.max_message_chars, 1),
        "max_turns": _cap("MEMORA_MAX_TURNS", get("MEMORA_MAX_TURNS")),
        "max_session_tokens": _cap("MEMORA_MAX_SESSION_TOKENS", get("MEMORA_MAX_SESSION_TOKENS")),
        "max_server_tokens": _cap("MEMORA_MAX_SERVER_TOKENS", get("MEMORA_MAX_SERVER_TOKENS")),
        "data_dir": str(get("MEMORA_DATA_DIR") or defaults.data_dir),
        "store_url": _store_url(get("MEMORA_STORE_URL")),
        "conversation_idle_days": _int(
            "MEMORA_CONVERSATION_IDLE_DAYS", get("MEMORA_CONVERSATION_IDLE_DAYS") or defaults.conversation_idle_days, 1
        ),
        "max_conversation_kb": _conversation_kb(get("MEMORA_MAX_CONVERSATION_KB") or defaults.max_conversation_kb),
        "max_new_conversations_per_hour": _int(
            "MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR",
            get("MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR") or defaults.max_new_conversations_per_hour,
            1,
        ),
        "max_store_mb": _int("MEMORA_MAX_STORE_MB", get("MEMORA_MAX_STORE_MB") or defaults.max_store_mb, 1),
        "shutdown_grace_s": _seconds("MEMORA_SHUTDOWN_GRACE_S", get("MEMORA_SHUTDOWN_GRACE_S") or defaults.shutdown_grace_s),
    }


def _conversation_kb(raw: Any) -> int:
    value = _int("MEMORA_MAX_CONVERSATION_KB", raw, 1)
    if value * 1024 > MAX_SAVED_BYTES:
        raise SettingsError(f"MEMORA_MAX_CONVERSATION_KB must be at most {MAX_SAVED_BYTES // 1024}, not {value}")
    return value


def _store_url(raw: Any) -> str | None:
    if raw is None:
        return None
    try:
        return check_store_url(str(raw))
    except StoreURLError as error:
        raise SettingsError(str(error)) from None


def build_backend(settings: Settings) -> Backend:
    """The backend the settings select.

    Raises SettingsError for ``openai`` without a key and ``chat`` without a base URL.
    """
    from memora.backends import OfflineBackend

    if settings.backend == "offline":
        return OfflineBackend()
    import openai

    if settings.backend == "chat":
        from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend

        if not settings.base_url:
            raise SettingsError("The chat backend needs MEMORA_BASE_URL (Ollama: http://localhost:11434/v1).")
        client = openai.OpenAI(
            api_key=settings.chat_api_key or NO_KEY,
            base_url=settings.base_url,
            timeout=_timeout(settings),
            max_retries=settings.max_retries,
        )
        return ChatCompletionsBackend(client, label=f"OpenAI-compatible server ({shown_url(settings.base_url)})")
    if not settings.api_key:
        raise SettingsError("The openai backend needs OPENAI_API_KEY (environment, secrets, or the page's key field).")
    from memora.backends.openai_responses import OPENAI_HOST, PROXY_PROFILE, OpenAIResponsesBackend

    client = openai.OpenAI(
        api_key=settings.api_key,
        base_url=settings.base_url,
        timeout=_timeout(settings),
        max_retries=settings.max_retries,
    )
    if settings.base_url and urlsplit(settings.base_url).hostname != OPENAI_HOST:
        return OpenAIResponsesBackend(client, profile=PROXY_PROFILE)
    return OpenAIResponsesBackend(client)


def _timeout(settings: Settings) -> Any:  # -> openai.Timeout
    import openai

    return openai.Timeout(settings.timeout_s, connect=min(CONNECT_TIMEOUT_S, settings.timeout_s))


def shown_url(url: str) -> str:
    """``url`` without any ``user:password@`` part, fit to show in the UI."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def build_token_counter(settings: Settings, backend: Backend) -> TokenCounter:
    """The ShortTermMemory's ``token_counter``: local o200k_base, or the server's count endpoint.

    Raises SettingsError for ``api`` counting with a backend that cannot count.
    """
    from memora.tokens import ApiTokenCounter, LocalTokenCounter

    if settings.token_counting == "local":
        return LocalTokenCounter()
    if not callable(getattr(backend, "count_input_tokens", None)):
        raise SettingsError("MEMORA_TOKEN_COUNTING=api needs MEMORA_BACKEND=openai; this backend cannot count remotely.")
    return ApiTokenCounter(backend)  # type: ignore[arg-type]


def build_memory(settings: Settings, backend: Backend | None = None, token_counter: TokenCounter | None = None) -> ShortTermMemory:
    """A fresh ShortTermMemory as ``settings`` describe it: backend, model, budget, window, counting and caps.

    ``backend`` defaults to ``build_backend(settings)``; ``token_counter`` to
    ``build_token_counter(settings, backend)``. Raises SettingsError or
    ValueError (a budget too small, say) when the settings are unusable.
    """
    backend = backend if backend is not None else build_backend(settings)
    return ShortTermMemory(
        client=backend,
        model=settings.model,
        max_input_tokens=settings.max_input_tokens,
        max_recent_turns=settings.max_recent_turns,
        token_counter=token_counter or build_token_counter(settings, backend),
        limits=settings.limits,
        max_reply_tokens=settings.max_reply_tokens,
        context_window=settings.context_window,
        fold_policy=settings.fold_policy,
    )
