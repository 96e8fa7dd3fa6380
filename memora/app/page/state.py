"""The page's session state: every key is created in ``setup_state``, and only there.

One browser session owns one ``ShortTermMemory``; nothing lives at module
level, so sessions never share a conversation, a key or a setting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import streamlit as st

from memora.app.build import build_backend, build_memory, configured_memory
from memora.app.page.i18n import DEFAULT_LANGUAGE, LANGUAGES
from memora.app.settings import Settings, SettingsError, load_settings
from memora.classroom.guard import GuardedBackend
from memora.memory import ShortTermMemory

# Session keys. The *_INPUT keys belong to widgets; their values are seeded here.
MEMORY = "memory"
SETTINGS = "settings"
BACKEND_NAME = "backend_name"
KEY_SOURCE = "key_source"
PENDING_TEXT = "pending_text"
RESTORE_TEXT = "restore_text"
NOTICE = "notice"
COMMAND = "command"
SETTINGS_NOTICE = "settings_notice"
LANG = "lang"
CHAT_INPUT = "chat_input"
BACKEND_INPUT = "backend_input"
MODEL_INPUT = "model_input"
API_KEY_INPUT = "api_key_input"
BUDGET_INPUT = "budget_input"
WINDOW_INPUT = "window_input"
FOLD_POLICY_INPUT = "fold_policy_input"
OLDER_MESSAGES_OPEN = "older_messages_open"
SUMMARY_PANEL_OPEN = "summary_panel_open"
HISTORY_PANEL_OPEN = "history_panel_open"
CONTEXT_PANEL_OPEN = "context_panel_open"
USAGE_PANEL_OPEN = "usage_panel_open"
# Long lists a page at a time (memora/app/page/pager.py): the page shown of each, 1 the newest.
OLDER_MESSAGES_PAGE = "older_messages_page"
HISTORY_PAGE = "history_page"
LEDGER_PAGE = "ledger_page"
# What the panels derive from the frozen history and the append-only ledger, kept until they change
# (memora/app/page/derived.py).
DERIVED = "derived"
# Teaching tools and the summary off the critical path (memora/app/page/tools.py,
# memora/app/page/turn.py).
PREFOLD_AT = "prefold_at"
PROBE_SCENARIO_INPUT = "probe_scenario_input"
PROBE_RESULT = "probe_result"
# a file_uploader: Streamlit refuses a seeded value, so it is not seeded
IMPORT_INPUT = "import_input"
IMPORT_NOTICE = "import_notice"
# How many deletions (Delete or Forget) this session made: the two confirmations' popovers are keyed
# by it (memora/app/page/forget.py), so a deletion draws them anew, closed.
DELETIONS = "deletions"
# The reply in progress (memora/app/page/turn.py, drawn by memora/app/page/reply_tail.py) and the
# settings changed while it runs.
REPLY_JOB = "reply_job"
STOP_BUTTON = "stop_button"
DEFERRED_SETTINGS = "deferred_settings"
# "What if" replays (memora/app/page/panels.py, issue 21): whether their panel is open, and the last
# replay with its cache key.
WHAT_IF_PANEL_OPEN = "what_if_panel_open"
# Whether the Teaching tools and Settings panels are open: closed, their widgets are not drawn
# (issue 28, 80 students).
TOOLS_PANEL_OPEN = "tools_panel_open"
SETTINGS_PANEL_OPEN = "settings_panel_open"
# Whether the glossary's popover is open: closed, its words are not drawn
# (memora/app/page/glossary.py).
GLOSSARY_OPEN = "glossary_open"
WHAT_IF = "what_if"
PANELS_OPEN = (
    OLDER_MESSAGES_OPEN,
    SUMMARY_PANEL_OPEN,
    CONTEXT_PANEL_OPEN,
    HISTORY_PANEL_OPEN,
    USAGE_PANEL_OPEN,
    WHAT_IF_PANEL_OPEN,
    TOOLS_PANEL_OPEN,
    SETTINGS_PANEL_OPEN,
    GLOSSARY_OPEN,
)
"""Every expander and popover whose open state the page keeps. A language switch renames them, and
Streamlit counts a renamed expander as a new one, closed: the switch carries their state over
(``settings_panel.render_language``)."""
TURN_BOX_OPEN_PREFIX = "turn_box_open_"
"""Whether a turn's box in the chat is open (``chat._render_turn_box``), one key a turn:
``turn_box_open(turn)``. A box draws its picture, table and fold lines only while open. These keys
are the one exception to ``setup_state``: a conversation's turns are not known in advance, so each
box's widget creates its key, closed, and Streamlit drops it once the box leaves the chat's newest
messages; the language switch carries the open ones over."""


def turn_box_open(turn: int) -> str:
    """The session key of turn ``turn``'s box: stable for the turn, so a box stays open across runs
    and new turns."""
    return f"{TURN_BOX_OPEN_PREFIX}{turn}"


# Conversation persistence (memora/app/page/conversation.py): the session's ConversationKeeper, and
# whether the URL's was opened.
CONVERSATION = "conversation"
CONVERSATION_OPENED = "conversation_opened"
# a turn on this conversation was running elsewhere when it was opened (a stopping process's)
FINISHING = "finishing"
# that turn has ended: the next run, before any widget, opens what it saved
FINISHED_ELSEWHERE = "finished_elsewhere"
# this session has started a turn of its own: a later catch-up is not the restart's
SENT_HERE = "sent_here"
# the browser's cookie, or the one this session sets (a test may put its own in)
BROWSER_SECRET = "browser_secret"
# the secret this session's "Forget this browser" dropped: its cookie is replaced
FORGOTTEN_SECRET = "forgotten_secret"
# A reload during a reply (memora/app/page/handover.py): the adopted flight and this session's own
# memory, until the reply ends.
ADOPTED = "adopted"

KeySource = Literal["secrets", "env", "field"]


@dataclass(frozen=True)
class Notice:
    """A message for the user, translated when shown so that a language switch applies to it.

    ``key`` and ``params`` name an i18n message; ``error``, when set, is
    rendered through ``memora.app.page.i18n.error_message`` into the ``reason`` placeholder.
    """

    level: Literal["info", "success", "warning", "error"]
    key: str
    params: Mapping[str, Any] = field(default_factory=dict)
    error: BaseException | None = None


NO_SECRETS_FILE = "no-secrets-found"
"""The ``error_id`` of Streamlit's StreamlitSecretNotFoundError when there is no secrets file at
all. A file that cannot be parsed raises the same class (a FileNotFoundError too), with another
id."""


def read_secrets() -> dict[str, Any]:
    """``st.secrets`` as a plain dict; ``{}`` when there is no secrets file, the normal case.

    Raises SettingsError for a file that exists but cannot be read or parsed: it may hold the lock
    or the caps, so the page must not start without it. The error gives only where the file went
    wrong (TOML's line and column), never its text, which could quote a key.
    """
    try:
        return st.secrets.to_dict()
    except Exception as error:
        if getattr(error, "error_id", None) == NO_SECRETS_FILE:
            return {}
        where = re.search(r"\(at line \d+, column \d+\)", str(error.__cause__ or ""))
        raise SettingsError(
            f"secrets.toml could not be read ({type(error.__cause__ or error).__name__}"
            f"{' ' + where.group() if where else ''}): fix it or remove it"
        ) from None


def key_source(secrets: Mapping[str, Any], environ: Mapping[str, str]) -> KeySource | None:
    if secrets.get("OPENAI_API_KEY"):
        return "secrets"
    if environ.get("OPENAI_API_KEY"):
        return "env"
    return None


def new_memory(settings: Settings, backend: Any | None = None) -> ShortTermMemory:
    """A fresh memory for ``settings``, its backend guarded. Raises SettingsError or ValueError when
    they are unusable."""
    backend = guarded(settings, backend if backend is not None else build_backend(settings))
    return build_memory(settings, backend)


def guarded(settings: Settings, backend: Any) -> GuardedBackend:
    """``backend`` behind the server-wide budget and the redaction of every key in ``settings``."""
    return GuardedBackend(
        backend, secrets=settings.redacted_secrets, server_ledger=settings.server_ledger
    )


def _initial_memory(
    environ: Mapping[str, str],
) -> tuple[Settings, ShortTermMemory, KeySource | None]:
    """The configured settings and a memory on them; raises SettingsError, never falls back to
    defaults."""
    secrets = read_secrets()
    settings = load_settings(secrets, environ)
    backend = guarded(settings, build_backend(settings))
    memory = configured_memory(settings, backend)
    return settings, memory, key_source(secrets, environ)


LOCKED_ERROR_DETAILS = "type"
"""``client.showErrorDetails`` on a locked (classroom) page: an uncaught error shows students its
type and Streamlit's generic sentence, never its message, traceback, source lines or server paths
(those go to the server's log). On a laptop ``.streamlit/config.toml`` keeps ``full``: the person
reading it runs the server."""


def apply_error_details(settings: Settings) -> None:
    """Hides error details from the page when the settings are locked; the option is the whole
    server's, as the lock is."""
    if settings.locked:
        st.set_option("client.showErrorDetails", LOCKED_ERROR_DETAILS)


def _defaults(memory: ShortTermMemory, backend_name: str) -> dict[str, Any]:
    """Every key's first value; the settings widgets start from ``memory``'s own settings."""
    return {
        SETTINGS: Settings(),
        BACKEND_NAME: "offline",
        KEY_SOURCE: None,
        NOTICE: None,
        PENDING_TEXT: None,
        RESTORE_TEXT: None,
        COMMAND: None,
        SETTINGS_NOTICE: None,
        LANG: DEFAULT_LANGUAGE,
        BACKEND_INPUT: backend_name,
        MODEL_INPUT: memory.model,
        API_KEY_INPUT: "",
        BUDGET_INPUT: memory.max_input_tokens,
        WINDOW_INPUT: memory.max_recent_turns,
        FOLD_POLICY_INPUT: memory.limits.fold_policy,
        **dict.fromkeys(PANELS_OPEN, False),
        OLDER_MESSAGES_PAGE: 1,
        HISTORY_PAGE: 1,
        LEDGER_PAGE: 1,
        DERIVED: {},
        WHAT_IF: None,
        PREFOLD_AT: None,
        PROBE_SCENARIO_INPUT: None,
        PROBE_RESULT: None,
        IMPORT_NOTICE: None,
        DELETIONS: 0,
        REPLY_JOB: None,
        DEFERRED_SETTINGS: frozenset(),
        CONVERSATION: None,
        CONVERSATION_OPENED: False,
        FINISHING: False,
        FINISHED_ELSEWHERE: False,
        SENT_HERE: False,
        BROWSER_SECRET: None,
        FORGOTTEN_SECRET: None,
        ADOPTED: None,
    }


def setup_state(environ: Mapping[str, str] | None = None) -> Any:
    """Creates every session key on the first run; later runs leave them as they are.

    Returns ``st.session_state``. ``environ`` defaults to ``os.environ``. Raises SettingsError,
    before any key is created, when the configured settings are malformed
    (``memora.app.page.startup`` shows it).
    """
    state = st.session_state
    if MEMORY not in state:
        settings, memory, source = _initial_memory(os.environ if environ is None else environ)
        state[SETTINGS] = settings
        state[MEMORY] = memory
        apply_error_details(settings)
        state[BACKEND_NAME] = settings.backend
        state[KEY_SOURCE] = source
    defaults = _defaults(state[MEMORY], state.get(BACKEND_NAME, "offline"))
    # Widget keys are dropped by Streamlit when their widget is not drawn in a run, so they are
    # re-seeded every run.
    for key, value in defaults.items():
        if key not in state:
            state[key] = value
    if state[LANG] not in LANGUAGES:
        state[LANG] = DEFAULT_LANGUAGE
    return state
