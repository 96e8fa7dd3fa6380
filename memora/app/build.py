"""A memory and its backend, built as the settings (``memora.app.settings``) describe them.

``build_backend`` builds the same backend whichever way it was chosen: the environment, secrets, or
the page's widgets (``Settings.with_changes``). ``configured_memory`` is what a server starts with:
settings whose values cannot work together (a budget below the instructions, a conversation cap too
small for the largest first turn) stop the page and the REPL like a malformed value does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from memora.app.settings import Settings, SettingsError
from memora.memory import ShortTermMemory

if TYPE_CHECKING:
    from memora.memory.backend import Backend

CONNECT_TIMEOUT_S = 5.0
"""The SDK's own connect timeout: an unreachable server is reported in seconds, not minutes."""
LIMIT_SETTINGS = ("MEMORA_MAX_INPUT_TOKENS", "MEMORA_MAX_REPLY_TOKENS", "MEMORA_CONTEXT_WINDOW")
"""The settings whose values must fit together (``memora.memory.plan.check_limits``), each
well-formed on its own."""
COSTLIEST_CHARACTER = "\x00"
"""A character at its largest saved size: a control character is saved as ``\\u0000``, 6 bytes of
UTF-8 JSON, more than any other character (a non-ASCII one is saved as itself, at most 4 bytes)."""


def build_backend(settings: Settings) -> Backend:
    """The backend the settings select.

    Raises SettingsError for ``openai`` without a key and ``chat`` without a base URL (settings the
    page changed; ``load_settings`` refuses both before).
    """
    from memora.backends import OfflineBackend

    if settings.backend == "offline":
        return OfflineBackend()
    import openai

    if settings.backend == "chat":
        from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend

        if not settings.base_url:
            raise SettingsError(
                "The chat backend needs MEMORA_BASE_URL (Ollama: http://localhost:11434/v1)."
            )
        client = openai.OpenAI(
            api_key=settings.chat_api_key or NO_KEY,
            base_url=settings.base_url,
            timeout=_timeout(settings),
            max_retries=settings.max_retries,
        )
        label = f"OpenAI-compatible server ({shown_url(settings.base_url)})"
        return ChatCompletionsBackend(client, label=label)
    if not settings.api_key:
        raise SettingsError(
            "The openai backend needs OPENAI_API_KEY (environment, secrets, or the page's key"
            " field)."
        )
    from memora.backends.openai_responses import OPENAI_HOST, PROXY_PROFILE, OpenAIResponsesBackend

    client = openai.OpenAI(
        api_key=settings.api_key,
        base_url=settings.base_url,
        timeout=_timeout(settings),
        max_retries=settings.max_retries,
    )
    count_remotely = settings.token_counting == "api"
    if settings.base_url and urlsplit(settings.base_url).hostname != OPENAI_HOST:
        return OpenAIResponsesBackend(client, profile=PROXY_PROFILE, count_remotely=count_remotely)
    return OpenAIResponsesBackend(client, count_remotely=count_remotely)


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
    """A fresh ShortTermMemory as ``settings`` describe it: backend (which counts as
    ``MEMORA_TOKEN_COUNTING`` says), model, budget, window and caps. ``backend`` defaults to
    ``build_backend(settings)``. Raises SettingsError or ValueError (a budget too small, say) when
    the settings are unusable.
    """
    if backend is None:
        backend = build_backend(settings)
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


def configured_memory(settings: Settings, backend: Backend | None = None) -> ShortTermMemory:
    """``build_memory`` for the settings a server starts with: its ValueError (a budget below what
    the instructions need, or a budget plus reply cap over the context window) becomes a
    SettingsError naming the variables to fix, so the page and the REPL refuse to start on it like
    on any malformed value; then ``check_room_for_a_turn``."""
    try:
        memory = build_memory(settings, backend)
    except SettingsError:
        raise
    except ValueError as error:
        named = f"{', '.join(LIMIT_SETTINGS[:-1])} and {LIMIT_SETTINGS[-1]}"
        raise SettingsError(f"{named} do not fit together: {error}") from None
    check_room_for_a_turn(settings, memory)
    return memory


def largest_message(settings: Settings) -> str:
    """The message that takes the most saved bytes under ``settings``: ``MEMORA_MAX_MESSAGE_CHARS``
    characters, each at its largest saved size (``COSTLIEST_CHARACTER``, 6 bytes)."""
    return COSTLIEST_CHARACTER * settings.max_message_chars


def check_room_for_a_turn(settings: Settings, memory: ShortTermMemory) -> None:
    """Raises SettingsError when ``MEMORA_MAX_CONVERSATION_KB`` cannot hold a new conversation's
    first turn at its largest (``memora.classroom.store.room``): the largest message the settings
    allow (``largest_message``), with its reply at the reply cap and its folds at the summary cap.
    The store would otherwise refuse such a message, before it is sent, in a conversation that has
    room for nothing else.

    The bound grows with the message cap, the reply cap and the summary cap; the message says the
    smallest value that works with the other settings as they are. Without a store
    (``MEMORA_STORE_URL=off``) nothing is saved, so nothing is checked.
    """
    from memora.classroom.store import OFF
    from memora.classroom.store.room import turn_growth
    from memora.classroom.store.saved import dumps_saved

    if settings.store_url == OFF:
        return
    empty = len(dumps_saved(memory, "zh-TW").encode())  # the longer language code
    needed = empty + turn_growth(memory, largest_message(settings))
    if needed > settings.max_conversation_kb * 1024:
        raise SettingsError(
            f"MEMORA_MAX_CONVERSATION_KB={settings.max_conversation_kb} cannot hold one turn at"
            " these settings (a first turn of the largest message, MEMORA_MAX_MESSAGE_CHARS="
            f"{settings.max_message_chars:,} characters, can save up to {needed:,} bytes with"
            " MEMORA_MAX_REPLY_TOKENS and the summary cap as they are): use at least"
            f" {math.ceil(needed / 1024)}, or lower MEMORA_MAX_MESSAGE_CHARS or"
            " MEMORA_MAX_REPLY_TOKENS."
        )
