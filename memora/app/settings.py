"""Settings from environment variables and Streamlit secrets; no Streamlit import here.

Precedence, highest first: Streamlit secrets, then the environment, then defaults.
Settings fail closed: ``load_settings`` raises one SettingsError listing every malformed value, and the page
(``memora.app.page.startup``) and the REPL stop on it; nothing falls back to a default, which would open a locked
classroom unlocked. A variable given but empty is refused too, never read as unset; a key's empty value is no key,
unless the lock is on or the backend needs it (docs/empty-settings.md). Every number has a largest value.
Each variable is declared once, as a field of ``_Variables`` (pydantic-settings), with its type, its range and what
it accepts in words; pydantic validates them all at once, and each error it reports becomes one line of the
SettingsError. What pydantic would take but Memora refuses ("1_000", ``True`` for a number) is refused before it.
The page passes ``st.secrets`` in as a plain mapping, and may change a loaded
``Settings`` with ``with_changes`` (its own widgets). Building backends and memories from
the settings is ``memora.app.build``.

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
  5xx, with backoff; default 2. Under ``MEMORA_MAX_SERVER_TOKENS`` the guard makes them
  instead, each try booked (``memora.classroom.guard``); a reply's only before its stream begins.
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
  being written may take to finish and be saved; default 5, at most 300 (``memora.classroom.shutdown``). Every
  other wait for a stopping process is derived from it (``memora.classroom.grace``): ``memora.serve`` waits the
  grace, the 3 s unwind and 10 s more for a process it stopped, so it honours any grace up to that bound.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, HttpUrl, SecretStr, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memora.classroom.grace import DEFAULT_SHUTDOWN_GRACE_S, MAX_SHUTDOWN_GRACE_S
from memora.classroom.limits import DEFAULT_MAX_MESSAGE_CHARS, SessionLimits
from memora.classroom.server_budget import DEFAULT_DATA_DIR, ServerLedger
from memora.classroom.store import StoreCaps, StoreURLError, check_store_url, default_store_url, is_postgres
from memora.classroom.store.saved import MAX_SAVED_BYTES
from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, MAX_RECENT_TURNS, MAX_REPLY_TOKENS, FoldPolicy, policies

if TYPE_CHECKING:
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
DEFAULT_MAX_RETRIES = 2
DEFAULT_CONVERSATION_IDLE_DAYS = 30
DEFAULT_MAX_CONVERSATION_KB = 1024
"""1 MiB: about 400 short turns (250 KiB at 100 turns, summary versions included: benchmarks/conversation_save.py),
ten times a classroom's 40-turn cap; a file padded to an import's 2 MiB, its bulk in the last context, is refused."""
DEFAULT_MAX_NEW_CONVERSATIONS_PER_HOUR = 20
DEFAULT_MAX_STORE_MB = 1024


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

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)


class SettingsError(ValueError):
    """One or more configured values are malformed or missing: each line of the message names its variable and
    what it accepts. ``problems`` holds those lines. A secret's value (a key, a URL that may hold a password) is
    never quoted; any other malformed value is, so that a typo shows."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems: tuple[str, ...] = problems


_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
"""ASCII digits and one point: float() would also take fullwidth or Arabic-Indic digits, "1_000", "1e3" and "inf",
which ``_WHOLE`` refuses."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_KEY = re.compile(r"[!-~]+")  # printable ASCII, no space: what an HTTP Authorization header can carry
_FLAG_WORDS = ("1", "true", "yes", "on", "0", "false", "no", "off")
_NOT_SHOWN = " (the value is not shown: it may hold a password)"
_HTTP_URL: TypeAdapter[HttpUrl] = TypeAdapter(HttpUrl)

MAX_SECONDS = 3600
"""The longest ``MEMORA_TIMEOUT``: an hour. A socket or a wait given much more raises OverflowError, long after the
start. ``MEMORA_SHUTDOWN_GRACE_S`` has a bound of its own (``MAX_SHUTDOWN_GRACE_S``, 300 s): ``memora.serve`` and a
tab waiting for a stopping process derive their waits from it (``memora.classroom.grace``)."""
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


@dataclass(frozen=True)
class Accepts:
    """What a variable accepts, in words, for its problem: "``NAME`` must be ``text``, not 'what was given'".
    ``secret`` values (a key, a URL that may hold a password) are never quoted; ``shown`` replaces the quote."""

    text: str
    secret: bool = False
    shown: str = _NOT_SHOWN
    out_of_range_as_number: bool = False
    """A whole number out of range is shown as the number read (40 for "40" or a TOML 40.0), not as given."""


class _Refused(ValueError):
    """A value that pydantic would take, but Memora does not (``"1_000"``, ``True`` for a number, ``"y"``)."""


def _given(raw: Any, *, empty_is_none: bool = False) -> Any:
    """One value, not empty: a table or a list from secrets.toml, or an empty value (never read as unset), is
    its own problem; an empty key is no key (``empty_is_none``)."""
    if isinstance(raw, (dict, list)):
        raise PydanticCustomError("table", "one value in secrets.toml, not a table or a list")
    if raw == "":
        if empty_is_none:
            return None
        raise PydanticCustomError("empty", "empty")
    return raw


def _before(check: Callable[[Any], Any], *, empty_is_none: bool = False) -> BeforeValidator:
    """``check`` after ``_given``: each type's own refusals of what pydantic would otherwise take."""

    def validate(raw: Any) -> Any:
        raw = _given(raw, empty_is_none=empty_is_none)
        return None if raw is None else check(raw)

    return BeforeValidator(validate)


def _ascii_whole(raw: Any) -> Any:
    # pydantic takes True as 1, and "1_000", " 40 " and "40.0" as whole numbers; a TOML 40.0 is one.
    if isinstance(raw, bool) or (isinstance(raw, str) and not _WHOLE.fullmatch(raw)):
        raise _Refused
    return raw


def _ascii_decimal(raw: Any) -> Any:
    if isinstance(raw, bool) or (isinstance(raw, str) and not _DECIMAL.fullmatch(raw)):
        raise _Refused
    return raw


def _flag_word(raw: Any) -> Any:
    # pydantic also takes "t", "y" and "f"; a flag keeps to the words the documents list.
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower()
    if word not in _FLAG_WORDS:
        raise _Refused
    return word


def _lower(raw: Any) -> Any:
    return raw.strip().lower() if isinstance(raw, str) else raw


def _issued_key(raw: Any) -> Any:
    if not isinstance(raw, str) or not _KEY.fullmatch(raw):
        raise _Refused
    return raw


def _one_line(raw: Any) -> Any:
    if isinstance(raw, str) and _CONTROL.search(raw):
        raise _Refused
    return raw


def _server_url(raw: Any) -> Any:
    # pydantic's parser reads "http:///v1" as the host "v1", and percent-encodes a space: both are typos here.
    if not isinstance(raw, str) or _CONTROL.search(raw) or " " in raw or not urlsplit(raw).hostname:
        raise _Refused
    try:
        _HTTP_URL.validate_python(raw)
    except ValidationError:
        raise _Refused from None
    return raw


def _store_url(raw: Any) -> Any:
    if not isinstance(raw, str) or _CONTROL.search(raw):
        raise _Refused
    try:
        check_store_url(raw)
        urlsplit(raw).port  # noqa: B018 - raises ValueError for a port that is not a number
    except (StoreURLError, ValueError):
        raise _Refused from None
    return raw


def _whole(minimum: int, maximum: int) -> Any:
    """A whole number from ``minimum`` to ``maximum``, written in ASCII digits."""
    accepts = Accepts(f"a whole number from {minimum} to {maximum}", out_of_range_as_number=True)
    return Annotated[int | None, Field(ge=minimum, le=maximum), _before(_ascii_whole), accepts]


def _choice(choices: tuple[str, ...]) -> Any:
    return Annotated[Literal[choices] | None, _before(_lower), Accepts(f"one of {', '.join(choices)}")]


def _text(what: str) -> Any:
    return Annotated[str | None, _before(_one_line), Accepts(f"{what} on one line, without control characters")]


def _seconds(maximum: float) -> Any:
    """A number of seconds above 0 and at most ``maximum``, written in ASCII digits and one point."""
    accepts = Accepts(f"a number of seconds above 0 and at most {maximum} (such as 5 or 0.5)")
    return Annotated[float | None, Field(gt=0, le=maximum, allow_inf_nan=False), _before(_ascii_decimal), accepts]


_Flag = Annotated[bool | None, _before(_flag_word), Accepts("true or false (or 1/0, yes/no, on/off)")]
_Key = Annotated[
    SecretStr | None,
    _before(_issued_key, empty_is_none=True),
    Accepts("the key as issued: printable ASCII without spaces", secret=True, shown=" (the value is not shown)"),
]
_ServerURL = Annotated[
    str | None, _before(_server_url), Accepts("an http:// or https:// URL with a host, such as http://localhost:11434/v1", secret=True)
]
_StoreURL = Annotated[
    str | None, _before(_store_url), Accepts("off, sqlite:///<path> or postgresql://user:password@host:5432/db", secret=True)
]


class _Variables(BaseSettings):
    """Every variable as given, each validated by its type: None where it was not given. ``load_settings`` reads it
    from secrets first, then the environment (``_Given``), and turns it into ``Settings`` with the defaults."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore")

    api_key: _Key = Field(None, alias="OPENAI_API_KEY")
    base_url: _ServerURL = Field(None, alias="MEMORA_BASE_URL")
    openai_base_url: _ServerURL = Field(None, alias="OPENAI_BASE_URL")
    model: _text("a model's name") = Field(None, alias="MEMORA_MODEL")
    backend: _choice(BACKENDS) = Field(None, alias="MEMORA_BACKEND")
    token_counting: _choice(TOKEN_COUNTING) = Field(None, alias="MEMORA_TOKEN_COUNTING")
    max_input_tokens: _whole(1, MAX_TOKENS) = Field(None, alias="MEMORA_MAX_INPUT_TOKENS")
    max_recent_turns: _whole(0, MAX_COUNT) = Field(None, alias="MEMORA_MAX_RECENT_TURNS")
    max_reply_tokens: _whole(1, MAX_TOKENS) = Field(None, alias="MEMORA_MAX_REPLY_TOKENS")
    context_window: _whole(1, MAX_TOKENS) = Field(None, alias="MEMORA_CONTEXT_WINDOW")
    fold_policy: _choice(FOLD_POLICIES) = Field(None, alias="MEMORA_FOLD_POLICY")
    chat_api_key: _Key = Field(None, alias="MEMORA_API_KEY")
    timeout_s: _seconds(MAX_SECONDS) = Field(None, alias="MEMORA_TIMEOUT")
    max_retries: _whole(0, MAX_RETRIES) = Field(None, alias="MEMORA_MAX_RETRIES")
    locked: _Flag = Field(None, alias="MEMORA_LOCK_SETTINGS")
    max_message_chars: _whole(1, MAX_MESSAGE_CHARS) = Field(None, alias="MEMORA_MAX_MESSAGE_CHARS")
    max_turns: _whole(1, MAX_COUNT) = Field(None, alias="MEMORA_MAX_TURNS")
    max_session_tokens: _whole(1, MAX_TOKENS) = Field(None, alias="MEMORA_MAX_SESSION_TOKENS")
    max_server_tokens: _whole(1, MAX_TOKENS) = Field(None, alias="MEMORA_MAX_SERVER_TOKENS")
    data_dir: _text("a folder") = Field(None, alias="MEMORA_DATA_DIR")
    store_url: _StoreURL = Field(None, alias="MEMORA_STORE_URL")
    conversation_idle_days: _whole(1, MAX_IDLE_DAYS) = Field(None, alias="MEMORA_CONVERSATION_IDLE_DAYS")
    max_conversation_kb: _whole(1, MAX_SAVED_BYTES // 1024) = Field(None, alias="MEMORA_MAX_CONVERSATION_KB")
    max_new_conversations_per_hour: _whole(1, MAX_COUNT) = Field(None, alias="MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR")
    max_store_mb: _whole(1, MAX_STORE_MB) = Field(None, alias="MEMORA_MAX_STORE_MB")
    shutdown_grace_s: _seconds(MAX_SHUTDOWN_GRACE_S) = Field(None, alias="MEMORA_SHUTDOWN_GRACE_S")


def _accepts(field: str) -> Accepts:
    return next(item for item in _Variables.model_fields[field].metadata if isinstance(item, Accepts))


VARIABLES: dict[str, str] = {str(info.alias): name for name, info in _Variables.model_fields.items()}
"""Each variable's name, and the field of ``_Variables`` that holds it."""
SECRET_SETTINGS = tuple(alias for alias, name in VARIABLES.items() if _accepts(name).secret)
"""The settings that may hold a secret (a key, a URL's password): their problems never quote the value, which
tests/test_settings.py checks for each of these names."""
KEYS = ("OPENAI_API_KEY", "MEMORA_API_KEY")
"""The variables whose empty value is no key, as an absent one, rather than a problem (docs/empty-settings.md)."""


class _Given(PydanticBaseSettingsSource):
    """One place variables are given (the secrets or the environment): each variable ``_Variables`` reads, asked by
    name, stripped; a variable it does not give is left out, so that the next source, or the default, decides."""

    def __init__(self, settings_cls: type[BaseSettings], given: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        values = {name: given.get(name) for name in VARIABLES}
        self.values = {name: value.strip() if isinstance(value, str) else value for name, value in values.items() if value is not None}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(str(field.alias)), str(field.alias), False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


def _read(secrets: _Given, environ: _Given, without: Collection[str] = ()) -> _Variables:
    """``_Variables`` from both sources, secrets first; ``without`` names variables to leave at their defaults."""
    kept = [_Given(_Variables, {k: v for k, v in source.values.items() if k not in without}) for source in (secrets, environ)]
    return _Variables(_build_sources=(tuple(kept), {}))


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
    secrets, environ = secrets or {}, os.environ if environ is None else environ
    from_secrets, from_environ = _Given(_Variables, secrets), _Given(_Variables, environ)
    given = {**from_environ.values, **from_secrets.values}
    problems: list[str] = []
    try:
        variables = _read(from_secrets, from_environ)
    except ValidationError as error:
        problems = [_problem(detail, given[str(detail["loc"][0])]) for detail in error.errors()]
        # The well-formed rest is read again, so that what they need of each other is checked too.
        malformed = {str(detail["loc"][0]) for detail in error.errors()}
        variables = _read(from_secrets, from_environ, without=malformed)
    else:
        malformed = set()
    problems += _needs(variables, given, malformed)
    problems += _unknown_names(secrets, environ)
    if problems:
        raise SettingsError(*problems)
    return _settings(variables)


GRACE = "MEMORA_SHUTDOWN_GRACE_S"


def shutdown_grace_s(secrets: Mapping[str, Any], environ: Mapping[str, str]) -> float:
    """``MEMORA_SHUTDOWN_GRACE_S`` as ``load_settings`` reads it from the same ``secrets`` and ``environ`` (secrets
    first; the default when neither gives it), read alone: ``memora.serve`` learns each process's grace before it
    starts it. Raises SettingsError, with the line ``load_settings`` would give, for a value that is malformed
    (empty, not a number, out of its bound); the other variables are not looked at."""
    sources = [_Given(_Variables, {GRACE: source[GRACE]} if GRACE in source else {}) for source in (secrets, environ)]
    given = {**sources[1].values, **sources[0].values}
    try:
        variables = _Variables(_build_sources=(tuple(sources), {}))
    except ValidationError as error:
        raise SettingsError(*(_problem(detail, given[GRACE]) for detail in error.errors())) from None
    return DEFAULT_SHUTDOWN_GRACE_S if variables.shutdown_grace_s is None else variables.shutdown_grace_s


def _problem(detail: ErrorDetails, given: Any) -> str:
    """One line of SettingsError for a value pydantic refused: the variable, what it accepts, and what was
    ``given`` (a secret's never shown)."""
    name = str(detail["loc"][0])
    accepts = _accepts(VARIABLES[name])
    if detail["type"] == "empty":
        return f"{name} is empty: give it a value, or leave it out to use its default"
    if detail["type"] == "table":
        return f"{name} must be one value in secrets.toml, not a table or a list"
    if accepts.secret:
        return f"{name} must be {accepts.text}{accepts.shown}"
    if accepts.out_of_range_as_number and detail["type"] in ("greater_than_equal", "less_than_equal"):
        return f"{name} must be {accepts.text}, not {int(given)}"
    return f"{name} must be {accepts.text}, not {given!r}"


def _needs(variables: _Variables, given: Mapping[str, Any], malformed: Collection[str]) -> list[str]:
    """What the well-formed values need of each other: ``chat`` a URL and a model, ``api`` counting ``openai``, and
    an empty key is no key only while the lock is off and the backend does not need it. A malformed backend or
    counting is reported alone, not what it would need."""
    problems = []
    backend = _backend(variables)
    if not {"MEMORA_BACKEND", "MEMORA_TOKEN_COUNTING"} & set(malformed):
        if backend == "chat" and "MEMORA_BASE_URL" not in given and "OPENAI_BASE_URL" not in given:
            problems.append(
                "MEMORA_BACKEND=chat needs MEMORA_BASE_URL, the server's URL ending in /v1 (Ollama: http://localhost:11434/v1)."
            )
        if backend == "chat" and "MEMORA_MODEL" not in given:
            problems.append("MEMORA_BACKEND=chat needs MEMORA_MODEL, a model the server has (Ollama: llama3.2).")
        if variables.token_counting == "api" and backend != "openai":
            problems.append("MEMORA_TOKEN_COUNTING=api needs MEMORA_BACKEND=openai; other servers have no count endpoint.")
    for name in (name for name in KEYS if given.get(name) == ""):
        if variables.locked:
            problems.append(
                f"{name} is empty while MEMORA_LOCK_SETTINGS is on: give the key, or leave the variable out for a locked page without it"
            )
        elif name == "OPENAI_API_KEY" and backend == "openai":
            problems.append(f"{name} is empty while MEMORA_BACKEND=openai needs it: give the key")
    return problems


def _backend(variables: _Variables) -> BackendName:
    if variables.backend is not None:
        return variables.backend
    return "openai" if variables.api_key is not None else "offline"


def _settings(variables: _Variables) -> Settings:
    """``Settings`` from the variables given, each one not given at its default."""
    given = variables.model_dump(exclude_none=True, exclude={"backend", "api_key", "chat_api_key", "base_url", "openai_base_url"})
    return Settings(
        **given,
        backend=_backend(variables),
        api_key=_revealed(variables.api_key),
        chat_api_key=_revealed(variables.chat_api_key),
        base_url=variables.base_url or variables.openai_base_url,
    )


def _revealed(key: SecretStr | None) -> str | None:
    """The key itself, for the client that sends it; ``Settings`` keeps it out of ``repr``."""
    return None if key is None else key.get_secret_value()


NOT_SETTINGS = ("MEMORA_TEST_", "MEMORA_LLAMA_")
"""Prefixes of variables that are not the app's settings: the test suite's and the benchmarks' (a test database, the
llama.cpp the real-server tests start)."""


def _unknown_names(secrets: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """A ``MEMORA_`` variable or secret that no setting reads is a misspelling (``MEMORA_LOCK_SETTING``): ignored, it
    would open a locked classroom unlocked. Each is a problem, with the settings its name is close to."""
    given = {name for name in (*secrets, *environ) if isinstance(name, str) and name.startswith("MEMORA_")}
    unknown = sorted(name for name in given - set(VARIABLES) if not name.startswith(NOT_SETTINGS))
    known = sorted(name for name in VARIABLES if name.startswith("MEMORA_"))
    problems = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=2)
        problems.append(f"{name} is not a setting Memora reads" + (f": did you mean {' or '.join(close)}?" if close else ""))
    return problems
