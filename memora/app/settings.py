"""Settings from environment variables and Streamlit secrets; no Streamlit import here.

Each variable is declared once, as a field of ``Settings`` (pydantic-settings): its name (the
alias), its type and range, its default, and what it means in words (the field's description). The
list below, and the table in docs/configuration.md, are generated from those fields by
``python -m memora.app.settings_docs``; tests/test_settings_docs.py fails on any difference.

Precedence, highest first: Streamlit secrets, then the environment, then defaults. Settings fail
closed: ``load_settings`` raises one SettingsError listing every malformed value, and the page
(``memora.app.page.startup``) and the REPL stop on it; nothing falls back to a default, which would
open a locked classroom unlocked. A variable given but empty is refused too, never read as unset; a
key's empty value is no key, unless the lock is on or the backend needs it (docs/empty-settings.md).
Every number has a largest value. pydantic validates every field in one pass, and each error it
reports becomes one line of the SettingsError. What pydantic would take but Memora refuses ("1_000",
``True`` for a number) is refused by each type's own validator before pydantic reads it.

What pydantic cannot say stays here, each with its test: a ``MEMORA_`` name that no field reads is a
problem (``_unknown_names``), and a malformed value's line names what the variable accepts
(``_problem``). Building backends and memories from the settings is ``memora.app.build``.

Variables (each may also be a key in ``.streamlit/secrets.toml``):

- ``MEMORA_BACKEND``: one of offline, openai, chat; default ``openai`` with a key, else ``offline``.
- ``MEMORA_LOCK_SETTINGS``: true or false (or 1/0, yes/no, on/off); default ``false``.
- ``OPENAI_API_KEY``: the key as issued: printable ASCII without spaces; default none.
- ``MEMORA_API_KEY``: the key as issued: printable ASCII without spaces; default none.
- ``MEMORA_TOKEN_COUNTING``: one of local, api; default ``local``.
- ``OPENAI_BASE_URL``: an http:// or https:// URL with a host, such as http://localhost:11434/v1;
  default none.
- ``MEMORA_BASE_URL``: an http:// or https:// URL with a host, such as http://localhost:11434/v1;
  default ``OPENAI_BASE_URL``, else none.
- ``MEMORA_MODEL``: a model's name on one line, without control characters; default ``gpt-5-mini``.
- ``MEMORA_TIMEOUT``: a number of seconds above 0 and at most 3600 (such as 5 or 0.5); default
  ``120``.
- ``MEMORA_MAX_RETRIES``: a whole number from 0 to 10; default ``2``.
- ``MEMORA_MAX_INPUT_TOKENS``: a whole number from 1 to 1000000000000; default ``1000``.
- ``MEMORA_MAX_RECENT_TURNS``: a whole number from 0 to 1000000; default ``3``.
- ``MEMORA_MAX_REPLY_TOKENS``: a whole number from 1 to 1000000000000; default ``1000``.
- ``MEMORA_FOLD_POLICY``: one of window, watermark; default ``window``.
- ``MEMORA_CONTEXT_WINDOW``: a whole number from 1 to 1000000000000; default none.
- ``MEMORA_MAX_MESSAGE_CHARS``: a whole number from 1 to 200000; default ``20000``.
- ``MEMORA_MAX_TURNS``: a whole number from 1 to 1000000; default no cap.
- ``MEMORA_MAX_SESSION_TOKENS``: a whole number from 1 to 1000000000000; default no cap.
- ``MEMORA_MAX_SERVER_TOKENS``: a whole number from 1 to 1000000000000; default no cap.
- ``MEMORA_DATA_DIR``: a folder on one line, without control characters; default ``~/.memora``.
- ``MEMORA_STORE_URL``: off, sqlite:///<path> or postgresql://user:password@host:5432/db; default
  ``conversations.sqlite3`` under ``MEMORA_DATA_DIR``.
- ``MEMORA_CONVERSATION_IDLE_DAYS``: a whole number from 1 to 36500; default ``30``.
- ``MEMORA_MAX_CONVERSATION_KB``: a whole number from 1 to 8192; default ``1024``.
- ``MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR``: a whole number from 1 to 1000000; default ``20``.
- ``MEMORA_MAX_STORE_MB``: a whole number from 1 to 1000000000; default ``1024``.
- ``MEMORA_SHUTDOWN_GRACE_S``: a number of seconds above 0 and at most 300 (such as 5 or 0.5);
  default ``5``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    HttpUrl,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memora.classroom.grace import DEFAULT_SHUTDOWN_GRACE_S, MAX_SHUTDOWN_GRACE_S
from memora.classroom.limits import DEFAULT_MAX_MESSAGE_CHARS, SessionLimits
from memora.classroom.server_budget import DEFAULT_DATA_DIR, ServerLedger
from memora.classroom.store import (
    StoreCaps,
    StoreURLError,
    check_store_url,
    default_store_url,
    is_postgres,
)
from memora.classroom.store.saved import MAX_SAVED_BYTES
from memora.classroom.transcript.format import MAX_MESSAGE_CHARS
from memora.memory import (
    DEFAULT_MODEL,
    MAX_INPUT_TOKENS,
    MAX_RECENT_TURNS,
    MAX_REPLY_TOKENS,
    FoldPolicy,
    policies,
)

if TYPE_CHECKING:
    from memora.classroom.postgres_ledger import PostgresServerLedger

BackendName = Literal["offline", "openai", "chat"]
BACKENDS: tuple[BackendName, ...] = ("offline", "openai", "chat")
# The registry's, the default first: the page's radio lists them so.
FOLD_POLICIES: tuple[FoldPolicy, ...] = policies.names()
TokenCounting = Literal["local", "api"]
TOKEN_COUNTING: tuple[TokenCounting, ...] = ("local", "api")
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 2

MAX_SECONDS = 3600
"""The longest ``MEMORA_TIMEOUT``: an hour. A socket or a wait given much more raises OverflowError,
long after the start. ``MEMORA_SHUTDOWN_GRACE_S`` has a bound of its own (``MAX_SHUTDOWN_GRACE_S``,
300 s): ``memora.serve`` and a tab waiting for a stopping process derive their waits from it
(``memora.classroom.grace``)."""
MAX_TOKENS = 10**12
"""The largest token figure a setting may give: above any model's window or a class's budget, and
any sum of bookings under it fits the 64-bit integers of SQLite and PostgreSQL."""
MAX_COUNT = 10**6
"""The largest count of turns, recent turns or new conversations an hour."""
MAX_RETRIES = 10
"""The SDK waits up to 8 s between retries: ten is over a minute of retrying one request."""
MAX_IDLE_DAYS = 36_500
"""A hundred years: ``now - idle days`` stays a date (a billion days overflowed on every page)."""
MAX_STORE_MB = 10**9
"""In bytes, still under SQLite's and PostgreSQL's 64-bit integers."""


class SettingsError(ValueError):
    """One or more configured values are malformed or missing: each line of the message names its
    variable and what it accepts. ``problems`` holds those lines. A secret's value (a key, a URL
    that may hold a password) is never quoted; any other malformed value is, so that a typo
    shows."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems: tuple[str, ...] = problems


_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
"""ASCII digits and one point: float() would also take fullwidth or Arabic-Indic digits, "1_000",
"1e3" and "inf", which ``_WHOLE`` refuses."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ONE_LINE = r"^[^\x00-\x1f\x7f-\x9f]*$"
"""No control character (``_CONTROL``), as a pattern pydantic checks: a name or a folder on one
line."""
# Printable ASCII, no space: what an HTTP Authorization header can carry.
_KEY = re.compile(r"[!-~]+")
_FLAG_WORDS = ("1", "true", "yes", "on", "0", "false", "no", "off")
_NOT_SHOWN = " (the value is not shown: it may hold a password)"
_HTTP_URL: TypeAdapter[HttpUrl] = TypeAdapter(HttpUrl)


@dataclass(frozen=True)
class Accepts:
    """What a variable accepts, in words, for its problem: "``NAME`` must be ``text``, not 'what was
    given'".

    ``secret`` values (a key, a URL that may hold a password) are never quoted; ``shown`` replaces
    the quote.
    """

    text: str
    secret: bool = False
    shown: str = _NOT_SHOWN
    out_of_range_as_number: bool = False
    """A whole number out of range is shown as the number read (40 for "40" or a TOML 40.0), not as
    given."""


class _Refused(ValueError):
    """A value that pydantic would take, but Memora does not (``"1_000"``, ``True`` for a number,
    ``"y"``)."""


def _needs(message: str) -> PydanticCustomError:
    """A value well-formed on its own that another setting's value rules out; ``message`` is its
    whole line."""
    return PydanticCustomError("needs", message)


def _one_value(raw: Any) -> Any:
    """``raw`` if it is one value: a table or a list from secrets.toml, or an empty value (never
    read as unset), is its own problem."""
    if isinstance(raw, (dict, list)):
        raise PydanticCustomError("table", "one value in secrets.toml, not a table or a list")
    if raw == "":
        raise PydanticCustomError("empty", "empty")
    return raw


def _before(check: Callable[[Any], Any]) -> BeforeValidator:
    """``check`` after ``_one_value``: each type's own refusals of what pydantic would otherwise
    take. A default of None (no cap, no URL) is not checked."""

    def validate(raw: Any) -> Any:
        return None if raw is None else check(_one_value(raw))

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


def _server_url(raw: Any) -> Any:
    # pydantic's parser reads "http:///v1" as the host "v1", and percent-encodes a space: both are
    # typos here.
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


def _alias(info: ValidationInfo) -> str:
    return str(Settings.model_fields[str(info.field_name)].alias)


def _key(raw: Any, info: ValidationInfo) -> Any:
    """A key as issued; an empty one is no key, unless the lock is on or the backend needs it.

    Reads ``locked`` and ``backend``, declared before the keys: a malformed one is not in
    ``info.data``, and then asks nothing of the key.
    """
    if raw is None:
        return None
    if raw == "":
        name = _alias(info)
        if info.data.get("locked"):
            raise _needs(
                f"{name} is empty while MEMORA_LOCK_SETTINGS is on: give the key, or leave the"
                " variable out for a locked page without it"
            )
        if name == "OPENAI_API_KEY" and info.data.get("backend") == "openai":
            raise _needs(f"{name} is empty while MEMORA_BACKEND=openai needs it: give the key")
        return None
    if not isinstance(_one_value(raw), str) or not _KEY.fullmatch(raw):
        raise _Refused
    return raw


def _counting_needs_openai(counting: TokenCounting, info: ValidationInfo) -> TokenCounting:
    # A malformed backend is reported alone, not what it would need.
    if counting == "api" and info.data.get("backend", "openai") != "openai":
        raise _needs(
            "MEMORA_TOKEN_COUNTING=api needs MEMORA_BACKEND=openai; other servers have no count"
            " endpoint."
        )
    return counting


def _chat_needs(info: ValidationInfo) -> bool:
    """Whether ``chat`` is chosen, and a well-formed backend and counting leave what it needs to be
    asked."""
    return info.data.get("backend") == "chat" and "token_counting" in info.data


def _base_url(url: str | None, info: ValidationInfo) -> str | None:
    """``MEMORA_BASE_URL``, else ``OPENAI_BASE_URL``: the server's URL. ``chat`` needs one of them
    given; a malformed ``OPENAI_BASE_URL`` (not in ``info.data``) was given, and is reported
    alone."""
    if url is not None or "openai_base_url" not in info.data:
        return url
    fallback = info.data["openai_base_url"]
    if fallback is None and _chat_needs(info):
        raise _needs(
            "MEMORA_BACKEND=chat needs MEMORA_BASE_URL, the server's URL ending in /v1"
            " (Ollama: http://localhost:11434/v1)."
        )
    return fallback


def _model(raw: Any, info: ValidationInfo) -> Any:
    """The model given, else ``DEFAULT_MODEL``; ``chat`` has no default model and needs one
    given."""
    if raw is not None:
        return _one_value(raw)
    if _chat_needs(info):
        raise _needs(
            "MEMORA_BACKEND=chat needs MEMORA_MODEL, a model the server has (Ollama: llama3.2)."
        )
    return DEFAULT_MODEL


def _whole(minimum: int, maximum: int) -> Any:
    """A whole number from ``minimum`` to ``maximum``, written in ASCII digits."""
    accepts = Accepts(f"a whole number from {minimum} to {maximum}", out_of_range_as_number=True)
    return Annotated[int, Field(ge=minimum, le=maximum), _before(_ascii_whole), accepts]


def _cap(minimum: int, maximum: int) -> Any:
    """As ``_whole``, or None: no cap, the default of each cap that has one."""
    accepts = Accepts(f"a whole number from {minimum} to {maximum}", out_of_range_as_number=True)
    return Annotated[int | None, Field(ge=minimum, le=maximum), _before(_ascii_whole), accepts]


def _choice(choices: tuple[str, ...], *after: AfterValidator) -> Any:
    return Annotated[
        Literal[choices],
        _before(_lower),
        *after,
        Accepts(f"one of {', '.join(choices)}"),
    ]


def _text(what: str) -> Any:
    return Annotated[
        str,
        _before(_one_value),
        Field(pattern=_ONE_LINE),
        Accepts(f"{what} on one line, without control characters"),
    ]


def _seconds(maximum: float) -> Any:
    """A number of seconds above 0 and at most ``maximum``, written in ASCII digits and one
    point."""
    accepts = Accepts(f"a number of seconds above 0 and at most {maximum} (such as 5 or 0.5)")
    return Annotated[
        float,
        Field(gt=0, le=maximum, allow_inf_nan=False),
        _before(_ascii_decimal),
        accepts,
    ]


_Flag = Annotated[bool, _before(_flag_word), Accepts("true or false (or 1/0, yes/no, on/off)")]
_Key = Annotated[
    str | None,
    BeforeValidator(_key),
    Accepts(
        "the key as issued: printable ASCII without spaces",
        secret=True,
        shown=" (the value is not shown)",
    ),
]
_ServerURL = Annotated[
    str | None,
    _before(_server_url),
    Accepts(
        "an http:// or https:// URL with a host, such as http://localhost:11434/v1",
        secret=True,
    ),
]
_StoreURL = Annotated[
    str | None,
    _before(_store_url),
    Accepts("off, sqlite:///<path> or postgresql://user:password@host:5432/db", secret=True),
]
_Model = Annotated[
    str,
    BeforeValidator(_model),
    Field(pattern=_ONE_LINE),
    Accepts("a model's name on one line, without control characters"),
]


def _in_words(default: str) -> dict[str, Any]:
    """The default as docs/configuration.md and the list above say it, where it is not the field's
    value."""
    return {"default_in_words": default}


class Settings(BaseSettings):
    """Every variable Memora reads, once: everything needed to build a memory and its backend.

    Fields are validated in the order they are declared, and a field's validator sees the
    well-formed fields above it (``ValidationInfo.data``): the lock and the backend come first, so
    that an empty key, a counting or a server's URL can ask what they need of them.
    ``load_settings`` builds it from secrets and the environment; ``Settings(...)`` by field name
    (tests, benchmarks) reads nothing else, never ``os.environ``. The page changes a loaded one with
    ``with_changes``, which validates nothing: its widgets check their own values. ``api_key`` and
    ``chat_api_key`` never appear in ``repr``, nor does ``store_url``.
    """

    model_config = SettingsConfigDict(
        frozen=True,
        case_sensitive=True,
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
    )

    backend: _choice(BACKENDS) = Field(
        "offline",
        alias="MEMORA_BACKEND",
        description=(
            "`offline`, `openai` (the Responses API) or `chat` (any OpenAI-compatible Chat"
            " Completions server: Ollama, LM Studio, vLLM, llama.cpp)"
        ),
        json_schema_extra=_in_words("`openai` with a key, else `offline`"),
    )
    locked: _Flag = Field(
        False,
        alias="MEMORA_LOCK_SETTINGS",
        description=(
            "for a shared classroom link: `true` locks backend, model, key, budget and window for"
            " every session; the page hides or disables their widgets, and its callbacks refuse"
            " changes even when a request claims otherwise"
        ),
    )
    api_key: _Key = Field(
        None,
        alias="OPENAI_API_KEY",
        repr=False,
        description=(
            "the OpenAI key: with it, the backend is OpenAI's Responses API; used by the `openai`"
            " backend only, so it is never sent to another server"
        ),
    )
    chat_api_key: _Key = Field(
        None,
        alias="MEMORA_API_KEY",
        repr=False,
        description="the `chat` server's key, if it needs one (the OpenAI key is never sent there)",
    )
    token_counting: _choice(TOKEN_COUNTING, AfterValidator(_counting_needs_openai)) = Field(
        "local",
        alias="MEMORA_TOKEN_COUNTING",
        description=(
            "`local` (o200k_base, no network) or `api` (`responses.input_tokens.count` before each"
            " reply request, as in the article; `openai` backend only). A `chat` server with a"
            " tokenizer endpoint (llama.cpp, llama-cpp-python, vLLM) counts every request itself"
            " whatever this says (`memora.backends.server_tokenizer`)"
        ),
    )
    openai_base_url: _ServerURL = Field(
        None,
        alias="OPENAI_BASE_URL",
        description="the server's URL where `MEMORA_BASE_URL` is not given",
    )
    base_url: Annotated[_ServerURL, AfterValidator(_base_url)] = Field(
        None,
        alias="MEMORA_BASE_URL",
        description=(
            "the server's URL, ending in `/v1` (Ollama: `http://localhost:11434/v1`); required by"
            " `chat`. For `openai` it points the Responses API at a proxy or another endpoint"
            " (default: OpenAI's)"
        ),
        json_schema_extra=_in_words("`OPENAI_BASE_URL`, else none"),
    )
    model: _Model = Field(
        None,
        alias="MEMORA_MODEL",
        description="the model; `chat` has no default and requires it",
        json_schema_extra=_in_words(f"`{DEFAULT_MODEL}`"),
    )
    timeout_s: _seconds(MAX_SECONDS) = Field(
        DEFAULT_TIMEOUT_S,
        alias="MEMORA_TIMEOUT",
        description=(
            "seconds to wait for the server's answer, and between streamed bytes (a reasoning"
            " model may think a while before its first word); connecting is given at most 5"
            " seconds"
        ),
    )
    max_retries: _whole(0, MAX_RETRIES) = Field(
        DEFAULT_MAX_RETRIES,
        alias="MEMORA_MAX_RETRIES",
        description=(
            "the openai SDK's retries on connection errors, 408, 409, 429 and 5xx, with backoff;"
            " under `MEMORA_MAX_SERVER_TOKENS` Memora makes the same retries itself, each try"
            " booked (`memora.classroom.guard`), a reply's only before its stream begins"
        ),
    )
    max_input_tokens: _whole(1, MAX_TOKENS) = Field(
        MAX_INPUT_TOKENS,
        alias="MEMORA_MAX_INPUT_TOKENS",
        description="the memory's input-token budget: what one request may carry",
    )
    max_recent_turns: _whole(0, MAX_COUNT) = Field(
        MAX_RECENT_TURNS,
        alias="MEMORA_MAX_RECENT_TURNS",
        description="the recent window: the user/assistant pairs kept word for word",
    )
    max_reply_tokens: _whole(1, MAX_TOKENS) = Field(
        MAX_REPLY_TOKENS,
        alias="MEMORA_MAX_REPLY_TOKENS",
        description="the output cap of one reply; a reply stopped there is kept and marked as cut",
    )
    fold_policy: _choice(FOLD_POLICIES) = Field(
        policies.DEFAULT,
        alias="MEMORA_FOLD_POLICY",
        description=(
            "`window`: the article's rule, the oldest pair folded as it leaves the recent window"
            " (from the 4th turn with 3 recent turns), the default since it is the lesson the page"
            " teaches; `watermark`: fold only when a request would pass the budget, then every"
            " pair older than the window at once, under the same summary cap (fewer, larger"
            " summaries; a larger budget keeps more turns word for word)"
        ),
    )
    context_window: _cap(1, MAX_TOKENS) = Field(
        None,
        alias="MEMORA_CONTEXT_WINDOW",
        description=(
            "the server's context size in tokens (llama.cpp's `--n_ctx`), when known: the budget"
            " plus the largest output must fit in it. Unset, a server's context-overflow error"
            " teaches it"
        ),
    )
    max_message_chars: _whole(1, MAX_MESSAGE_CHARS) = Field(
        DEFAULT_MAX_MESSAGE_CHARS,
        alias="MEMORA_MAX_MESSAGE_CHARS",
        description=(
            "characters one message may have; longer ones are refused before anything is sent. At"
            " most the transcript's cap, so that every saved message can be restored"
        ),
    )
    max_turns: _cap(1, MAX_COUNT) = Field(
        None,
        alias="MEMORA_MAX_TURNS",
        description="finished turns per conversation, for a shared page",
        json_schema_extra=_in_words("no cap"),
    )
    max_session_tokens: _cap(1, MAX_TOKENS) = Field(
        None,
        alias="MEMORA_MAX_SESSION_TOKENS",
        description=(
            "tokens (the conversation's ledger total) per conversation, checked before each turn"
        ),
        json_schema_extra=_in_words("no cap"),
    )
    max_server_tokens: _cap(1, MAX_TOKENS) = Field(
        None,
        alias="MEMORA_MAX_SERVER_TOKENS",
        description=(
            "tokens every conversation on this server may spend together (reply, summary and"
            " prefold requests), kept across restarts: each request books its largest cost (input"
            " plus output cap) before it is sent and is settled to its bill after, so students"
            " sending at once never pass it. Unset: no cap and no file"
        ),
        json_schema_extra=_in_words("no cap"),
    )
    data_dir: _text("a folder") = Field(
        DEFAULT_DATA_DIR,
        alias="MEMORA_DATA_DIR",
        description=(
            "where that shared spend (`usage.sqlite3`) and the default conversation store"
            " (`conversations.sqlite3`) are kept, created on first use"
        ),
    )
    store_url: _StoreURL = Field(
        None,
        alias="MEMORA_STORE_URL",
        repr=False,  # a PostgreSQL URL may hold a password
        description=(
            "where each conversation is kept under its id, so that a reload or a restart in the"
            " browser that made it brings it back: `sqlite:///path`,"
            " `postgresql://user:password@host:5432/db` (several processes share conversations,"
            " and the server budget is kept there too), or `off`"
        ),
        json_schema_extra=_in_words("`conversations.sqlite3` under `MEMORA_DATA_DIR`"),
    )
    conversation_idle_days: _whole(1, MAX_IDLE_DAYS) = Field(
        30,
        alias="MEMORA_CONVERSATION_IDLE_DAYS",
        description="conversations not saved for longer are deleted (checked hourly)",
    )
    max_conversation_kb: _whole(1, MAX_SAVED_BYTES // 1024) = Field(
        # 1 MiB: about 400 short turns (250 KiB at 100 turns, summary versions included:
        # benchmarks/conversation_save.py), ten times a classroom's 40-turn cap; a file padded to an
        # import's 2 MiB, its bulk in the last context, is refused.
        1024,
        alias="MEMORA_MAX_CONVERSATION_KB",
        description=(
            "the saved size of one conversation (history, summary versions, ledger and last"
            " context), in KiB. A message is refused before it is sent once its turn, at its"
            " largest, could pass it, and the conversation stays as last saved; a cap that cannot"
            " hold a first turn of the largest message `MEMORA_MAX_MESSAGE_CHARS` allows stops the"
            " page and the REPL at start, saying the smallest value that works"
        ),
    )
    max_new_conversations_per_hour: _whole(1, MAX_COUNT) = Field(
        20,
        alias="MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR",
        description=(
            "conversations one browser may start in an hour (new ones from their first reply,"
            " imports, a second tab's copies)"
        ),
    )
    max_store_mb: _whole(1, MAX_STORE_MB) = Field(
        1024,
        alias="MEMORA_MAX_STORE_MB",
        description=(
            "every saved conversation together, in MiB; a message is refused before it is sent"
            " when the store has no room for its turn at its largest, and the page says so"
        ),
    )
    shutdown_grace_s: _seconds(MAX_SHUTDOWN_GRACE_S) = Field(
        DEFAULT_SHUTDOWN_GRACE_S,
        alias="MEMORA_SHUTDOWN_GRACE_S",
        description=(
            "when the server is stopped (SIGTERM, Ctrl-C), how long the replies being written may"
            " take to finish and be saved (`memora.classroom.shutdown`). Every other wait for a"
            " stopping process is derived from it (`memora.classroom.grace`). At most"
            f" {MAX_SHUTDOWN_GRACE_S}: `memora.serve` waits the grace, the 3 s unwind and 10 s more"
            " before it kills a process it stopped, and a tab waits the grace and the unwind for a"
            " turn running in a stopping process"
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _backend_from_the_key(cls, given: Any) -> Any:
        """Without ``MEMORA_BACKEND``, the backend is ``openai`` when an OpenAI key is given (an
        empty one is no key), else ``offline``."""
        if not isinstance(given, dict) or "MEMORA_BACKEND" in given or "backend" in given:
            return given
        key = given.get("OPENAI_API_KEY", given.get("api_key"))
        return {**given, "MEMORA_BACKEND": "openai" if key not in (None, "") else "offline"}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The values given, only: ``load_settings`` passes the secrets and the environment it was
        # handed, so that the page's st.secrets and a test's mapping decide, never os.environ behind
        # their back.
        return (init_settings,)

    @property
    def store_caps(self) -> StoreCaps:
        """What the conversation store keeps at most (``memora.classroom.store.base.StoreCaps``), in
        bytes and conversations."""
        return StoreCaps(
            self.max_conversation_kb * 1024,
            self.max_new_conversations_per_hour,
            self.max_store_mb * 1024 * 1024,
        )

    @property
    def conversation_store_url(self) -> str:
        """``store_url``, or the default SQLite file under ``data_dir``."""
        return self.store_url or default_store_url(self.data_dir)

    @property
    def server_ledger(self) -> ServerLedger | PostgresServerLedger | None:
        """The server-wide spend and its cap, or None when ``MEMORA_MAX_SERVER_TOKENS`` is unset; in
        PostgreSQL when the conversation store is there, so that every process sharing the store
        shares the budget."""
        if self.max_server_tokens is None:
            return None
        if is_postgres(self.store_url):
            from memora.classroom.postgres_ledger import PostgresServerLedger

            return PostgresServerLedger(str(self.store_url), self.max_server_tokens)
        return ServerLedger.in_dir(self.data_dir, self.max_server_tokens)

    @property
    def redacted_secrets(self) -> tuple[str, ...]:
        """Every secret these settings hold, in each form it may be shown in: both keys, and the
        password of the store's URL and of the server's URL (as written, percent-decoded and
        encoded); for ``redact``."""
        from memora.backends.redaction import url_secrets

        keys = tuple(key for key in (self.api_key, self.chat_api_key) if key)
        return keys + url_secrets(self.store_url) + url_secrets(self.base_url)

    @property
    def limits(self) -> SessionLimits:
        """The per-session caps, for ``ShortTermMemory(caps=...)``."""
        return SessionLimits(self.max_message_chars, self.max_turns, self.max_session_tokens)

    def with_changes(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (field names), not validated: the page's widgets check their own
        values."""
        return self.model_copy(update=changes)


def accepts(field: str) -> Accepts:
    """What the field ``field`` of ``Settings`` accepts, in words."""
    metadata = Settings.model_fields[field].metadata
    return next(item for item in metadata if isinstance(item, Accepts))


def default_in_words(field: str) -> str:
    """The default of the field ``field`` as the documents say it: its own words where it has them,
    else the value in backticks, or "none"."""
    info = Settings.model_fields[field]
    extra = info.json_schema_extra
    if isinstance(extra, dict) and "default_in_words" in extra:
        return str(extra["default_in_words"])
    value = info.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


VARIABLES: dict[str, str] = {str(info.alias): name for name, info in Settings.model_fields.items()}
"""Each variable's name, and the field of ``Settings`` that holds it, in the order they are
declared."""


def description(variable: str) -> str:
    """What ``variable`` means, in words: its field's description, which docs/configuration.md's
    table and the page's help show. Raises KeyError for a name that is not a setting."""
    return str(Settings.model_fields[VARIABLES[variable]].description)


SECRET_SETTINGS = tuple(alias for alias, name in VARIABLES.items() if accepts(name).secret)
"""The settings that may hold a secret (a key, a URL's password): their problems never quote the
value, which tests/test_settings.py checks for each of these names."""
GRACE = "MEMORA_SHUTDOWN_GRACE_S"


def _given_in(
    source: Mapping[str, Any], names: tuple[str, ...] = tuple(VARIABLES)
) -> dict[str, Any]:
    """Each of ``names`` that ``source`` gives, asked by name and stripped; one not given is left
    out, so that the next source, or the default, decides."""
    given = {}
    for name in names:
        value = source.get(name)
        if value is not None:
            given[name] = value.strip() if isinstance(value, str) else value
    return given


def load_settings(
    secrets: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Reads the variables listed in this module's docstring, secrets first.

    A value given but empty is refused, except a key's, which is no key unless the lock is on or the
    backend needs it (docs/empty-settings.md). With a key and no ``MEMORA_BACKEND`` the backend is
    ``openai``; without a key it is ``offline``. Raises one SettingsError listing every problem:
    each malformed value (a number out of range or not a number, an unknown choice, a flag that is
    not true or false, a URL that is not one, a key or a name with control characters), ``chat``
    without a base URL or model, ``api`` counting without ``openai``, and a ``MEMORA_`` name no
    setting reads. Nothing falls back to a default: a locked classroom with one typo must not open
    unlocked.
    """
    secrets = secrets or {}
    environ = os.environ if environ is None else environ
    given = {**_given_in(environ), **_given_in(secrets)}
    unknown = _unknown_names(secrets, environ)
    try:
        settings = Settings(**given)
    except ValidationError as error:
        raise SettingsError(
            *(_problem(detail, given) for detail in error.errors()), *unknown
        ) from None
    if unknown:
        raise SettingsError(*unknown)
    return settings


def shutdown_grace_s(secrets: Mapping[str, Any], environ: Mapping[str, str]) -> float:
    """``MEMORA_SHUTDOWN_GRACE_S`` as ``load_settings`` reads it from the same ``secrets`` and
    ``environ`` (secrets first; the default when neither gives it), read alone: ``memora.serve``
    learns each process's grace before it starts it. Raises SettingsError, with the line
    ``load_settings`` would give, for a value that is malformed (empty, not a number, out of its
    bound); the other variables are not looked at."""
    given = {**_given_in(environ, (GRACE,)), **_given_in(secrets, (GRACE,))}
    try:
        return Settings(**given).shutdown_grace_s
    except ValidationError as error:
        raise SettingsError(*(_problem(detail, given) for detail in error.errors())) from None


def _problem(detail: ErrorDetails, given: Mapping[str, Any]) -> str:
    """One line of SettingsError for a value pydantic refused: the variable, what it accepts, and
    what was given (a secret's never shown). A value that another setting rules out (``_needs``) is
    its own line."""
    name = str(detail["loc"][0])
    if detail["type"] == "needs":
        return detail["msg"]
    if detail["type"] == "empty":
        return f"{name} is empty: give it a value, or leave it out to use its default"
    if detail["type"] == "table":
        return f"{name} must be one value in secrets.toml, not a table or a list"
    words = accepts(VARIABLES[name])
    if words.secret:
        return f"{name} must be {words.text}{words.shown}"
    if words.out_of_range_as_number and detail["type"] in ("greater_than_equal", "less_than_equal"):
        return f"{name} must be {words.text}, not {int(given[name])}"
    return f"{name} must be {words.text}, not {given[name]!r}"


NOT_SETTINGS = ("MEMORA_TEST_", "MEMORA_LLAMA_")
"""Prefixes of variables that are not the app's settings: the test suite's and the benchmarks' (a
test database, the llama.cpp the real-server tests start)."""


def _unknown_names(secrets: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """A ``MEMORA_`` variable or secret that no setting reads is a misspelling
    (``MEMORA_LOCK_SETTING``): ignored, it would open a locked classroom unlocked. Each is a
    problem, with the settings its name is close to. pydantic's ``extra="forbid"`` cannot say this:
    the environment holds every other program's variables, and only the ``MEMORA_`` ones are
    ours."""
    given = {
        name
        for name in (*secrets, *environ)
        if isinstance(name, str) and name.startswith("MEMORA_")
    }
    unknown = sorted(name for name in given - set(VARIABLES) if not name.startswith(NOT_SETTINGS))
    known = sorted(name for name in VARIABLES if name.startswith("MEMORA_"))
    problems = []
    for name in unknown:
        problem = f"{name} is not a setting Memora reads"
        close = difflib.get_close_matches(name, known, n=2)
        if close:
            problem += f": did you mean {' or '.join(close)}?"
        problems.append(problem)
    return problems
