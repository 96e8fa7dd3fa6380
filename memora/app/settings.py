"""Settings from environment variables and Streamlit secrets; no Streamlit import here.

Precedence, highest first: Streamlit secrets, then the environment, then defaults.
Settings fail closed: ``load_settings`` raises one SettingsError listing every malformed value, and the page
(``memora.app.page.startup``) and the REPL stop on it; nothing falls back to a default, which would open a locked
classroom unlocked. A variable given but empty is refused too, never read as unset; a key's empty value is no key,
unless the lock is on or the backend needs it (docs/empty-settings.md). Every number has a largest value.
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
  teaches) or ``watermark`` (fold when a request would pass the budget; then every pair older than
  the window at once: fewer, larger summaries, under the same summary cap, and a larger
  budget keeps more turns verbatim).
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

Conversation persistence (``memora.classroom.store``; see docs/postgresql.md):

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
  being written may take to finish and be saved; default 5 (``memora.classroom.shutdown``).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from memora.classroom.limits import DEFAULT_MAX_MESSAGE_CHARS, SessionLimits
from memora.classroom.server_budget import DEFAULT_DATA_DIR, ServerLedger
from memora.classroom.store import StoreCaps, StoreURLError, check_store_url, default_store_url, is_postgres
from memora.classroom.store.saved import MAX_SAVED_BYTES
from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, MAX_RECENT_TURNS, MAX_REPLY_TOKENS, FoldPolicy, ShortTermMemory, policies

if TYPE_CHECKING:
    from memora.backends.base import Backend
    from memora.classroom.postgres_ledger import PostgresServerLedger

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
usually part-way), yet, with ``memora.classroom.shutdown.UNWIND_S`` after it, under the 10 s that ``docker stop`` waits before
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
        """What the conversation store keeps at most (``memora.classroom.store.base.StoreCaps``), in bytes and conversations."""
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
        """The per-session caps, for ``ShortTermMemory(caps=...)``."""
        return SessionLimits(self.max_message_chars, self.max_turns, self.max_session_tokens)

    @property
    def has_key(self) -> bool:
        """Whether an OpenAI key is set (the ``chat`` server's key is ``chat_api_key``)."""
        return bool(self.api_key)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)


class SettingsError(ValueError):
    """One or more configured values are malformed or missing: each line of the message names its variable and
    what it accepts. ``problems`` holds those lines. A secret's value (a key, a URL that may hold a password) is
    never quoted; any other malformed value is, so that a typo shows."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems: tuple[str, ...] = problems


T = TypeVar("T")
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
"""ASCII digits and one point: float() would also take fullwidth or Arabic-Indic digits, "1_000", "1e3" and "inf",
which ``_WHOLE`` refuses."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_KEY = re.compile(r"[!-~]+")  # printable ASCII, no space: what an HTTP Authorization header can carry


def _int(name: str, raw: Any, minimum: int, maximum: int) -> int:
    accepted = f"a whole number from {minimum} to {maximum}"
    # A TOML 40 or 40.0 is a number; a TOML true is not, though Python's int() would take it as 1.
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, bool) or not (isinstance(raw, int) or (isinstance(raw, str) and _WHOLE.fullmatch(raw))):
        raise SettingsError(f"{name} must be {accepted}, not {raw!r}")
    value = int(raw)
    if value < minimum or value > maximum:
        raise SettingsError(f"{name} must be {accepted}, not {value}")
    return value


def _seconds(name: str, raw: Any) -> float:
    """Seconds, written as ``_int`` takes whole numbers (ASCII digits, a sign) with a decimal point allowed."""
    accepted = f"{name} must be a number of seconds above 0 and at most {MAX_SECONDS} (such as 5 or 0.5), not {raw!r}"
    numeric = isinstance(raw, int | float) and not isinstance(raw, bool)
    if not (numeric or (isinstance(raw, str) and _DECIMAL.fullmatch(raw))):
        raise SettingsError(accepted)
    value = float(raw)
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise SettingsError(accepted)
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise SettingsError(f"{name} must be true or false (or 1/0, yes/no, on/off), not {raw!r}")


def _choice(name: str, raw: Any, choices: tuple[str, ...]) -> str:
    value = str(raw).strip().lower() if isinstance(raw, str) else None
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {raw!r}")
    return value


def _text(name: str, raw: Any, what: str) -> str:
    """A model's name or a folder: any text on one line."""
    if not isinstance(raw, str) or _CONTROL.search(raw):
        raise SettingsError(f"{name} must be {what} on one line, without control characters, not {raw!r}")
    return raw


def _key(name: str, raw: Any) -> str:
    if not isinstance(raw, str) or not _KEY.fullmatch(raw):
        raise SettingsError(f"{name} must be the key as issued: printable ASCII without spaces (the value is not shown)")
    return raw


_NOT_SHOWN = " (the value is not shown: it may hold a password)"


def _server_url(name: str, raw: Any) -> str:
    problem = f"{name} must be an http:// or https:// URL with a host, such as http://localhost:11434/v1{_NOT_SHOWN}"
    if not isinstance(raw, str) or _CONTROL.search(raw) or " " in raw:
        raise SettingsError(problem)
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number from 0 to 65535
    except ValueError:
        raise SettingsError(problem) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(problem)
    return raw


def _store_url(name: str, raw: Any) -> str:
    problem = f"{name} must be off, sqlite:///<path> or postgresql://user:password@host:5432/db{_NOT_SHOWN}"
    if not isinstance(raw, str) or _CONTROL.search(raw):
        raise SettingsError(problem)
    try:
        check_store_url(raw)
        urlsplit(raw).port  # noqa: B018 - raises ValueError for a port that is not a number
    except (StoreURLError, ValueError):
        raise SettingsError(problem) from None
    return raw


MAX_SECONDS = 3600
"""The longest ``MEMORA_TIMEOUT`` and ``MEMORA_SHUTDOWN_GRACE_S``: an hour. A socket or a wait given much more
raises OverflowError, long after the start."""
MAX_TOKENS = 10**12
"""The largest token figure a setting may give: above any model's window or a class's budget, and any sum of
bookings under it fits the 64-bit integers of SQLite and PostgreSQL."""
MAX_COUNT = 10**6
"""The largest count of turns, recent turns or new conversations an hour."""
MAX_MESSAGE_CHARS = 10**8
MAX_RETRIES = 10
"""The SDK waits up to 8 s between retries: ten is over a minute of retrying one request."""
MAX_IDLE_DAYS = 36_500
"""A hundred years: ``now - idle days`` stays a date (a billion days overflowed on every page)."""
MAX_STORE_MB = 10**9
"""In bytes, still under SQLite's and PostgreSQL's 64-bit integers."""


SECRET_SETTINGS = ("OPENAI_API_KEY", "MEMORA_API_KEY", "MEMORA_BASE_URL", "OPENAI_BASE_URL", "MEMORA_STORE_URL")
"""The settings that may hold a secret (a key, a URL's password): their parsers (``_key``, ``_server_url``,
``_store_url``) never quote the value, which tests/test_settings.py checks for each of these names."""


EMPTY = ""
"""What ``_Reader.raw`` returns for a variable given but empty (or only spaces): never the same as unset (None)."""


class _Reader:
    """Reads each variable, secrets first, and collects every malformed one rather than stopping at the first.

    A variable given but empty is a problem, not unset (docs/empty-settings.md): a lost value must not drop a
    lock, a cap or a store. The keys are read by ``key``, where empty means no key. A secret that is given wins
    over the environment, even empty. A value read from secrets.toml may be a TOML number or boolean; a table or
    a list is malformed whatever the variable.
    """

    def __init__(self, secrets: Mapping[str, Any], environ: Mapping[str, str]) -> None:
        self.secrets, self.environ = secrets, environ
        self.problems: list[str] = []
        self.asked: set[str] = set()
        self.empty_keys: list[str] = []

    def raw(self, name: str) -> Any:
        """The value as given, stripped; ``EMPTY`` when given but blank; None when not given at all."""
        self.asked.add(name)
        value = self.secrets.get(name)
        if value is None:
            value = self.environ.get(name)
        return value.strip() if isinstance(value, str) else value

    def read(self, name: str, parse: Callable[[str, Any], T], default: T) -> T:
        """``parse(name, value)``, or ``default`` when unset; a malformed value is noted and ``default`` returned
        only so that the other variables are still read: ``load_settings`` then raises with every problem."""
        raw = self.raw(name)
        if raw is None:
            return default
        if raw == EMPTY:
            self.problems.append(f"{name} is empty: give it a value, or leave it out to use its default")
            return default
        if isinstance(raw, (dict, list)):
            self.problems.append(f"{name} must be one value in secrets.toml, not a table or a list")
            return default
        try:
            return parse(name, raw)
        except SettingsError as error:
            self.problems.extend(error.problems)
            return default

    def whole(self, name: str, default: int, minimum: int, maximum: int) -> int:
        return self.read(name, lambda n, raw: _int(n, raw, minimum, maximum), default)

    def cap(self, name: str, maximum: int) -> int | None:
        """A number from 1 to ``maximum``, or None (no cap) when not given."""
        return self.read(name, lambda n, raw: _int(n, raw, 1, maximum), None)

    def key(self, name: str) -> str | None:
        """A key, or None when not given or given empty (no key); an empty one is noted for ``check_empty_keys``."""
        if self.raw(name) == EMPTY:
            self.empty_keys.append(name)
            return None
        return self.read(name, _key, None)

    def check_empty_keys(self, locked: bool, backend: str) -> None:
        """An empty key is no key, unless the lock is on or the backend needs that key: a key lost on the way must
        not open a locked classroom offline, nor leave ``openai`` without one."""
        for name in self.empty_keys:
            if locked:
                self.problems.append(
                    f"{name} is empty while MEMORA_LOCK_SETTINGS is on: give the key, or leave the variable out for "
                    "a locked page without it"
                )
            elif name == "OPENAI_API_KEY" and backend == "openai":
                self.problems.append(f"{name} is empty while MEMORA_BACKEND=openai needs it: give the key")


def load_settings(secrets: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Reads the variables listed in this module's docstring, secrets first.

    A value given but empty is refused, except a key's, which is no key unless the lock is on or the backend
    needs it (docs/empty-settings.md). With a key and no ``MEMORA_BACKEND`` the backend is ``openai``; without a
    key it is ``offline``.
    Raises one SettingsError listing every problem: each malformed value (a number out of range or not a
    number, an unknown choice, a flag that is not true or false, a URL that is not one, a key or a name with
    control characters), ``chat`` without a base URL or model, and ``api`` counting without ``openai``.
    Nothing falls back to a default: a locked classroom with one typo must not open unlocked.
    """
    reader = _Reader(secrets or {}, os.environ if environ is None else environ)
    values = {**_model_settings(reader), **_classroom_settings(reader)}
    reader.check_empty_keys(values["locked"], values["backend"])
    reader.problems += _unknown_names(reader)
    if reader.problems:
        raise SettingsError(*reader.problems)
    return Settings(**values)


NOT_SETTINGS = ("MEMORA_TEST_", "MEMORA_LLAMA_")
"""Prefixes of variables that are not the app's settings: the test suite's and the benchmarks' (a test database, the
llama.cpp the real-server tests start)."""


def _unknown_names(reader: _Reader) -> list[str]:
    """A ``MEMORA_`` variable or secret that no setting reads is a misspelling (``MEMORA_LOCK_SETTING``): ignored, it
    would open a locked classroom unlocked. Each is a problem, with the settings its name is close to."""
    given = {name for name in (*reader.secrets, *reader.environ) if isinstance(name, str) and name.startswith("MEMORA_")}
    unknown = sorted(name for name in given - reader.asked if not name.startswith(NOT_SETTINGS))
    known = sorted(name for name in reader.asked if name.startswith("MEMORA_"))
    problems = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=2)
        problems.append(f"{name} is not a setting Memora reads" + (f": did you mean {' or '.join(close)}?" if close else ""))
    return problems


def _model_settings(reader: _Reader) -> dict[str, Any]:
    """The backend, the model and the memory's own limits."""
    defaults = Settings()
    api_key = reader.key("OPENAI_API_KEY")
    # Both are read, so that a malformed one is refused even where the other wins.
    base_url = reader.read("MEMORA_BASE_URL", _server_url, None)
    openai_base_url = reader.read("OPENAI_BASE_URL", _server_url, None)
    model = reader.read("MEMORA_MODEL", partial(_text, what="a model's name"), None)
    before = len(reader.problems)
    backend = reader.read("MEMORA_BACKEND", partial(_choice, choices=BACKENDS), "openai" if api_key else "offline")
    counting = reader.read("MEMORA_TOKEN_COUNTING", partial(_choice, choices=TOKEN_COUNTING), "local")
    if len(reader.problems) == before:  # a malformed backend or counting is reported alone, not what it would need
        _check_backend(reader, backend, counting)
    return {
        "backend": backend,
        "model": model or defaults.model,
        "max_input_tokens": reader.whole("MEMORA_MAX_INPUT_TOKENS", defaults.max_input_tokens, 1, MAX_TOKENS),
        "max_recent_turns": reader.whole("MEMORA_MAX_RECENT_TURNS", defaults.max_recent_turns, 0, MAX_COUNT),
        "max_reply_tokens": reader.whole("MEMORA_MAX_REPLY_TOKENS", defaults.max_reply_tokens, 1, MAX_TOKENS),
        "context_window": reader.cap("MEMORA_CONTEXT_WINDOW", MAX_TOKENS),
        "fold_policy": reader.read("MEMORA_FOLD_POLICY", partial(_choice, choices=FOLD_POLICIES), defaults.fold_policy),
        "api_key": api_key,
        "base_url": base_url or openai_base_url,
        "chat_api_key": reader.key("MEMORA_API_KEY"),
        "token_counting": counting,
        "timeout_s": reader.read("MEMORA_TIMEOUT", _seconds, defaults.timeout_s),
        "max_retries": reader.whole("MEMORA_MAX_RETRIES", defaults.max_retries, 0, MAX_RETRIES),
    }


def _check_backend(reader: _Reader, backend: str, counting: str) -> None:
    """What the backend needs besides well-formed values: ``chat`` a URL and a model, ``api`` counting ``openai``."""
    if backend == "chat" and reader.raw("MEMORA_BASE_URL") is None and reader.raw("OPENAI_BASE_URL") is None:
        reader.problems.append(
            "MEMORA_BACKEND=chat needs MEMORA_BASE_URL, the server's URL ending in /v1 (Ollama: http://localhost:11434/v1)."
        )
    if backend == "chat" and reader.raw("MEMORA_MODEL") is None:
        reader.problems.append("MEMORA_BACKEND=chat needs MEMORA_MODEL, a model the server has (Ollama: llama3.2).")
    if counting == "api" and backend != "openai":
        reader.problems.append("MEMORA_TOKEN_COUNTING=api needs MEMORA_BACKEND=openai; other servers have no count endpoint.")


def _classroom_settings(reader: _Reader) -> dict[str, Any]:
    """The lock, the caps per conversation and per server, the store and its caps, and the shutdown grace."""
    defaults = Settings()
    return {
        "locked": reader.read("MEMORA_LOCK_SETTINGS", _flag, False),
        "max_message_chars": reader.whole("MEMORA_MAX_MESSAGE_CHARS", defaults.max_message_chars, 1, MAX_MESSAGE_CHARS),
        "max_turns": reader.cap("MEMORA_MAX_TURNS", MAX_COUNT),
        "max_session_tokens": reader.cap("MEMORA_MAX_SESSION_TOKENS", MAX_TOKENS),
        "max_server_tokens": reader.cap("MEMORA_MAX_SERVER_TOKENS", MAX_TOKENS),
        "data_dir": reader.read("MEMORA_DATA_DIR", partial(_text, what="a folder"), defaults.data_dir),
        "store_url": reader.read("MEMORA_STORE_URL", _store_url, None),
        "conversation_idle_days": reader.whole("MEMORA_CONVERSATION_IDLE_DAYS", defaults.conversation_idle_days, 1, MAX_IDLE_DAYS),
        "max_conversation_kb": reader.whole("MEMORA_MAX_CONVERSATION_KB", defaults.max_conversation_kb, 1, MAX_SAVED_BYTES // 1024),
        "max_new_conversations_per_hour": reader.whole(
            "MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR", defaults.max_new_conversations_per_hour, 1, MAX_COUNT
        ),
        "max_store_mb": reader.whole("MEMORA_MAX_STORE_MB", defaults.max_store_mb, 1, MAX_STORE_MB),
        "shutdown_grace_s": reader.read("MEMORA_SHUTDOWN_GRACE_S", _seconds, defaults.shutdown_grace_s),
    }


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
        return OpenAIResponsesBackend(client, profile=PROXY_PROFILE, count_remotely=settings.token_counting == "api")
    return OpenAIResponsesBackend(client, count_remotely=settings.token_counting == "api")


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


def build_memory(settings: Settings, backend: Backend | None = None) -> ShortTermMemory:
    """A fresh ShortTermMemory as ``settings`` describe it: backend (which counts as ``MEMORA_TOKEN_COUNTING`` says),
    model, budget, window and caps. ``backend`` defaults to ``build_backend(settings)``. Raises SettingsError or
    ValueError (a budget too small, say) when the settings are unusable.
    """
    backend = backend if backend is not None else build_backend(settings)
    return ShortTermMemory(
        client=backend,
        model=settings.model,
        max_input_tokens=settings.max_input_tokens,
        max_recent_turns=settings.max_recent_turns,
        caps=settings.limits,
        max_reply_tokens=settings.max_reply_tokens,
        context_window=settings.context_window,
        fold_policy=settings.fold_policy,
    )


LIMIT_SETTINGS = ("MEMORA_MAX_INPUT_TOKENS", "MEMORA_MAX_REPLY_TOKENS", "MEMORA_CONTEXT_WINDOW")
"""The settings whose values must fit together (``memora.memory.plan.check_limits``), each well-formed on its own."""


def configured_memory(settings: Settings, backend: Backend | None = None) -> ShortTermMemory:
    """``build_memory`` for the settings a server starts with: its ValueError (a budget below what the instructions
    need, or a budget plus reply cap over the context window) becomes a SettingsError naming the variables to fix,
    so the page and the REPL refuse to start on it like on any malformed value."""
    try:
        memory = build_memory(settings, backend)
    except SettingsError:
        raise
    except ValueError as error:
        raise SettingsError(f"{', '.join(LIMIT_SETTINGS[:-1])} and {LIMIT_SETTINGS[-1]} do not fit together: {error}") from None
    check_room_for_a_turn(settings, memory)
    return memory


def check_room_for_a_turn(settings: Settings, memory: ShortTermMemory) -> None:
    """Raises SettingsError when ``MEMORA_MAX_CONVERSATION_KB`` cannot hold a new conversation's first turn at its
    largest (``memora.classroom.store.room``): the store would refuse every first message, before it is sent.

    The bound grows with the reply cap and the summary cap; the message says the smallest value that works with
    the other settings as they are. Without a store (``MEMORA_STORE_URL=off``) nothing is saved, so nothing is checked.
    """
    from memora.classroom.store import OFF
    from memora.classroom.store.room import turn_growth
    from memora.classroom.store.saved import dumps_saved

    if settings.store_url == OFF:
        return
    needed = len(dumps_saved(memory, "zh-TW").encode()) + turn_growth(memory, "?")  # the longer language code
    if needed > settings.max_conversation_kb * 1024:
        raise SettingsError(
            f"MEMORA_MAX_CONVERSATION_KB={settings.max_conversation_kb} cannot hold one turn at these settings (a first "
            f"turn can save up to {needed:,} bytes, with MEMORA_MAX_REPLY_TOKENS and the summary cap as they are): "
            f"use at least {math.ceil(needed / 1024)}, or lower MEMORA_MAX_REPLY_TOKENS."
        )
