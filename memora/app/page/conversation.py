"""The page's conversation: open this browser's one in the URL, keep it saved, say where it stands.

A conversation belongs to the browser that made it. Each browser holds a random secret in a cookie
(``memora.app.page.browser``); the store keeps only its hash, bound to every conversation saved from
that browser (``memora.classroom.store.owner``). The id travels in the page's URL as ``?c=<id>``
(``st.query_params``), written after the first successful save (or when the first reply begins, so
that a reload during it finds it: ``memora.app.page.handover``): it is a locator, so two tabs keep
their own conversations and a reload, a bookmark or a server restart in the same browser opens the
same one. It is not a key: a link opened in another browser (or naming a conversation saved before
owners existed) opens a new conversation, with a one-line notice, and reads or writes nothing of the
linked one. The page offers the bare app URL as the link for the class; Export and Import move a
conversation elsewhere.

The cookie is read and set by ``memora.app.page.browser``: on a first visit the session makes the
secret at once, so its first save is already bound to it (a malformed cookie is replaced). An import
starts a new id; the old conversation stays in the store as it was. *Delete this conversation* and
*Forget this browser* (``memora.app.page.forget``) delete from the store. Saving is the memory's
``on_change`` hook (``memora.classroom.store.keeper``): it may run in a worker thread, so it writes
nothing to ``st.session_state``; this module reads the keeper's state on each run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from memora.app.page import handover, render, session_guard
from memora.app.page import state as keys
from memora.app.page.browser import browser_secret, remember_browser
from memora.app.page.i18n import LANGUAGES, error_message, t
from memora.app.page.state import Notice
from memora.app.settings import Settings
from memora.classroom.grace import DEFAULT_SHUTDOWN_GRACE_S
from memora.classroom.store import (
    CapReached,
    ConversationStore,
    Gone,
    IdleSweep,
    StoreCaps,
    StoreError,
    is_conversation_id,
    open_store,
)
from memora.classroom.store.keeper import BUSY_POLL_S, ConversationKeeper, ask_until_answered
from memora.classroom.store.owner import owner_of
from memora.classroom.store.reopen import Reopened, carry_choices, reopen, save_import
from memora.memory import ShortTermMemory

PARAM = "c"
"""The query parameter that carries the conversation id (a locator, not a key)."""
FINISHING_POLL_S = 1.0
"""How often a page looks again at a turn running on its conversation elsewhere
(``render_finishing``): one read-only question to the store (``ConversationStore.running``) a
second, only while such a turn runs."""


@st.cache_resource(show_spinner=False)
def shared_store(
    url: str,
    idle_days: int,
    caps: StoreCaps | None = None,
    grace_s: float = DEFAULT_SHUTDOWN_GRACE_S,
) -> tuple[ConversationStore, IdleSweep] | None:
    """One store per URL for the whole server process (its sessions share the connection), with its
    idle sweep; ``grace_s``: the process's shutdown grace, which a turn's holder may outlive a
    database restart by."""
    store = open_store(url, caps, grace_s)
    return None if store is None else (store, IdleSweep(store, timedelta(days=idle_days)))


def keep(state: Any) -> ConversationKeeper | None:
    """Call once per run, after ``setup_state`` and before anything draws the memory.

    On a session's first run it opens this browser's conversation the URL names. On later runs it
    follows the session's memory: a new memory object starts a new id, saved from its first turn (an
    import is saved by its own callback, ``adopt_import``, before it replaces the memory); a save
    that failed is retried, and a language, budget, window or fold policy changed since the last
    save is saved; the URL follows the id once it is saved. Returns the keeper, or None when
    conversations are not kept (``MEMORA_STORE_URL=off``).
    """
    if not state[keys.CONVERSATION_OPENED]:
        state[keys.CONVERSATION_OPENED] = True
        if state[keys.CONVERSATION] is None:
            # a test may have put its own keeper in, as it may a memory
            state[keys.CONVERSATION] = open_conversation(state)
    # a reply adopted from before a reload has ended: this session takes its own copy
    handover.finish(state)
    if state[keys.FINISHED_ELSEWHERE]:
        # here, before any widget is drawn: opening a version sets the settings' inputs
        state[keys.FINISHED_ELSEWHERE] = False
        if state[keys.CONVERSATION] is not None and follow_stored(state):
            state[keys.NOTICE] = state[keys.NOTICE] or caught_up_notice()
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    if keeper is None:
        return None
    keeper.language = state[keys.LANG]
    memory: ShortTermMemory = state[keys.MEMORY]
    if keeper.memory is None:
        keeper.attach(memory)
    elif memory is not keeper.memory:
        keeper.start_new(memory)
        if memory.history:
            keeper.save(memory, wait=False)
    elif keeper.retry():
        keeper.save_changed_choices()
    _sync_url(keeper)
    return keeper


def open_conversation(state: Any) -> ConversationKeeper | None:
    """The keeper for this browser's conversation in ``?c=``, restored into the session; a new one
    when there is none."""
    settings: Settings = state[keys.SETTINGS]
    opened = shared_store(
        settings.conversation_store_url,
        settings.conversation_idle_days,
        settings.store_caps,
        settings.shutdown_grace_s,
    )
    if opened is None:
        return None
    store, sweep = opened
    owner = owner_of(browser_secret(state))
    # A reload while this process has this browser's conversation newer than the store (a reply
    # running, a refused save).
    adopted = handover.adopt(state, st.query_params.get(PARAM), owner)
    if adopted is not None:
        return adopted
    session: ShortTermMemory = state[keys.MEMORY]
    # Asked before the load: a reply that lands between the two is then either in what is loaded or
    # waited for.
    state[keys.FINISHING] = _running_elsewhere(store, st.query_params.get(PARAM), owner)
    result = reopen(
        store,
        st.query_params.get(PARAM),
        session,
        owner=owner,
        locked=settings.locked,
        sweep=sweep,
    )
    if result.memory is not None:
        _continue_with(state, result)
    elif result.outcome == "missing" and state[keys.FINISHING]:
        # Its first reply is being finished by a process that stopped: the id is kept, and opened
        # once that reply is saved (``follow_stored``), so that her next message does not start a
        # second conversation beside it.
        return ConversationKeeper(store, st.query_params.get(PARAM), 0, owner=owner, sweep=sweep)
    elif result.outcome != "new":
        state[keys.NOTICE] = _not_restored(result, settings)
        # the link's conversation stays in the store, untouched; this tab starts anew
        del st.query_params[PARAM]
    return result.keeper


def _running_elsewhere(store: ConversationStore, requested_id: str | None, owner: str) -> bool:
    """Whether a turn of ``owner``'s runs now on the conversation the URL names, elsewhere by the
    store's account (a process stopping mid-reply, whose page came back here). False for no id, a
    malformed one, another browser's turn, or a store that cannot say."""
    if not is_conversation_id(requested_id):
        return False
    try:
        return store.running(requested_id or "", "", owner)
    except StoreError:
        return False


def caught_up_notice() -> Notice:
    """What the page says when it opened a later version of its conversation before her message. A
    page that came back on this process after its own stopped (``session_guard.came_back``), and has
    sent no turn here since, says her last reply was finished and saved while the server restarted:
    the usual case of a rolling restart. Any other page, or a later catch-up of the same page, says
    another tab saved it.

    Edge case: a page that came back while a second tab of the browser also saved a turn is told the
    first, which is true of the reply the stopped process finished."""
    restarted = session_guard.came_back() and not st.session_state[keys.SENT_HERE]
    return Notice(
        "info", "conversation.caught_up_restart" if restarted else "conversation.caught_up"
    )


def render_finishing(keeper: ConversationKeeper | None, lang: str, replying: bool) -> None:
    """While a turn on this conversation runs elsewhere (a stopping process finishing her last reply
    within its grace), says so and looks again every ``FINISHING_POLL_S``; once it has ended, runs
    the page again, whose ``keep`` opens the version its save left (``follow_stored``), so that the
    reply shows up as soon as it lands (at the latest, her next message waits for it:
    ``ConversationKeeper.room``). Draws nothing and asks nothing when no turn was running elsewhere
    as the conversation was opened, the usual page, nor while this page's own reply is being
    written."""
    state = st.session_state
    if not state[keys.FINISHING] or keeper is None or replying:
        return
    _watch_finishing(keeper, lang)


@st.fragment(run_every=FINISHING_POLL_S)
def _watch_finishing(keeper: ConversationKeeper, lang: str) -> None:
    state = st.session_state
    if state[keys.CONVERSATION] is keeper and keeper.turn_running_elsewhere():
        render.alert("info", t(lang, "conversation.finishing"), icon=":material/hourglass_top:")
        return
    state[keys.FINISHING] = False
    state[keys.FINISHED_ELSEWHERE] = state[keys.CONVERSATION] is keeper
    st.rerun(scope="app")


def wait_for_finishing(state: Any, on_wait: Callable[[], None]) -> bool:
    """Before her message is planned on a page that opened its conversation while a turn ran on it
    elsewhere: waits for that turn as long as it runs by the store's account (no fixed time;
    ``on_wait`` is called once as the wait begins), then opens the version its save left
    (``follow_stored``); True when it did. Returns at once, asking nothing, on a page that found no
    such turn. ``ConversationKeeper.room`` waits the same way for a saved conversation; this covers
    the first reply too, whose conversation the store did not hold yet when the page came back."""
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    if not state[keys.FINISHING] or keeper is None:
        return False
    if keeper.turn_running_elsewhere():
        on_wait()
        while keeper.turn_running_elsewhere():
            time.sleep(BUSY_POLL_S)
    state[keys.FINISHING] = False
    return follow_stored(state)


def follow_stored(state: Any) -> bool:
    """Opens the store's later version of this tab's conversation when this tab holds nothing
    unsaved of its own (``catch_up``); False, changing nothing, when the store holds no later
    version, this tab has unsaved work (its next save decides, as for any second tab), or the store
    cannot give it."""
    keeper: ConversationKeeper = state[keys.CONVERSATION]
    memory = keeper.memory
    if memory is None or len(memory.history) != keeper.stored_messages:
        return False
    try:
        # Asked again while PostgreSQL restarts: a first reply's save missed here lets her message
        # start the conversation beside it (version 0 is never "behind" in ``room``), and the two
        # saves fork it.
        row = ask_until_answered(lambda: keeper.store.load(keeper.conversation_id, keeper.owner))
    except StoreError:
        return False
    if row is None or row.version <= keeper.version:
        return False
    return catch_up(state)


def catch_up(state: Any) -> bool:
    """Opens anew this tab's conversation as the store holds it: a later version that another tab of
    this browser, or a process stopping mid-reply, saved after this tab opened it, while this tab
    held nothing unsaved of its own (``ConversationKeeper.room`` says so). The tab goes on with it,
    under the same id, instead of forking. False when the store cannot give it (down, or the copy
    refused): the caller then goes on as before, with a copy.

    Leaves a notice only when the stored copy holds a pending message (the stopped process could not
    answer it), which goes back in the input box; else the caller says what happened."""
    keeper: ConversationKeeper = state[keys.CONVERSATION]
    settings: Settings = state[keys.SETTINGS]
    session: ShortTermMemory = state[keys.MEMORY]
    result = reopen(
        keeper.store,
        keeper.conversation_id,
        session,
        owner=keeper.owner,
        locked=settings.locked,
        sweep=keeper.sweep,
    )
    if result.memory is None:
        return False
    # a changed setting is not unsaved work: it goes on
    result = carry_choices(keeper, state[keys.MEMORY], result)
    _continue_with(state, result)
    state[keys.CONVERSATION] = result.keeper
    if result.pending_message is None:
        state[keys.NOTICE] = None
    return True


def _continue_with(state: Any, result: Reopened) -> None:
    memory = result.memory
    assert memory is not None
    state[keys.MEMORY] = memory
    state[keys.BUDGET_INPUT] = memory.max_input_tokens
    state[keys.WINDOW_INPUT] = memory.max_recent_turns
    state[keys.FOLD_POLICY_INPUT] = memory.limits.fold_policy
    if result.language in LANGUAGES:
        state[keys.LANG] = result.language
    # As after an import: coming back sends no request; the next reply's prefold does what is due.
    state[keys.PREFOLD_AT] = len(memory.history)
    state[keys.NOTICE] = Notice("info", "conversation.restored", {"messages": len(memory.history)})
    if result.pending_message is not None:
        # the server stopped before answering it (memora.classroom.shutdown)
        state[keys.RESTORE_TEXT] = result.pending_message
        state[keys.NOTICE] = Notice(
            "warning", "conversation.restored_pending", {"messages": len(memory.history)}
        )


def _not_restored(result: Reopened, settings: Settings) -> Notice:
    # No notice names the id: a screenshot or the projector must not show it.
    requested = result.requested_id or ""
    if result.outcome == "missing" and not is_conversation_id(requested):
        return Notice("warning", "conversation.bad_id")
    if result.outcome == "missing":
        return Notice("warning", "conversation.not_here", {"days": settings.conversation_idle_days})
    if result.outcome == "refused":
        code = getattr(result.problem, "code", "bad_value")
        return Notice(
            "error",
            "conversation.refused",
            {"code": code, "path": getattr(result.problem, "path", "")},
        )
    return Notice("error", "conversation.load_failed", error=result.problem)


def adopt_import(state: Any, memory: ShortTermMemory) -> Notice | None:
    """Saves an imported conversation as this browser's new one; a notice naming the cap when the
    store refuses it, and then the session goes on with the conversation it had (nothing of it
    changed)."""
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    cap = None if keeper is None else save_import(keeper, memory)
    return None if cap is None else cap_notice(cap, "conversation.cap_import")


def cap_notice(cap: CapReached | Gone, prefix: str) -> Notice:
    """``prefix.<cap>``, with the limit as a size (``conversation``, ``store``) or a count
    (``browser``); for a conversation deleted (or a browser forgotten) in another tab,
    ``conversation.gone.<what>``, whatever the prefix."""
    if isinstance(cap, Gone):
        return Notice("error", f"conversation.gone.{cap.what}")
    limit = f"{cap.limit:,}" if cap.cap == "browser" else _size(cap.limit)
    return Notice("error", f"{prefix}.{cap.cap}", {"limit": limit})


def _size(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MB" if size >= 1024 * 1024 else f"{size / 1024:,.0f} KB"


def _sync_url(keeper: ConversationKeeper) -> None:
    current = st.query_params.get(PARAM)
    # During a first reply too, here or on a stopping process that is finishing it, so that a reload
    # finds it.
    kept = keeper.saved or handover.in_flight(keeper) or st.session_state[keys.FINISHING]
    if kept and current != keeper.conversation_id:
        st.query_params[PARAM] = keeper.conversation_id
    elif not kept and current is not None:
        # after a deletion, a new conversation's page carries no id until it is saved
        del st.query_params[PARAM]


def render_status(keeper: ConversationKeeper | None, lang: str) -> None:
    """The caption under the title: what is kept (never the id), the link for the class; then what
    went wrong."""
    if keeper is None:
        render.caption(":material/cloud_off: " + t(lang, "conversation.off"))
        render_class_link(lang)
        return
    secret = browser_secret(st.session_state)
    remember_browser(
        secret, t(lang, "conversation.cookies_blocked"), st.session_state[keys.FORGOTTEN_SECRET]
    )
    # the cookie just set (or kept) is the one a reconnect must present
    session_guard.bind_this_session(secret)
    if keeper.saved:
        render.caption(":material/bookmark: " + t(lang, "conversation.saved"))
    else:
        render.caption(":material/bookmark_border: " + t(lang, "conversation.unsaved"))
    render_class_link(lang)
    # read once: a worker thread may change them
    fork = keeper.fork
    failure = keeper.failure
    refusal = keeper.refusal
    gone = keeper.gone
    if gone is not None:
        render.alert("warning", t(lang, f"conversation.gone.{gone.what}"), icon=":material/delete:")
    if fork is not None:
        render.alert("warning", t(lang, "conversation.forked"), icon=":material/call_split:")
    if failure is not None:
        render.alert(
            "warning",
            t(lang, "conversation.save_failed", reason=error_message(lang, failure)),
            icon=":material/sync_problem:",
        )
    if refusal is not None:
        # "kept as last saved" only where something was saved: a new conversation refused at once
        # has no saved copy.
        notice = cap_notice(
            refusal, "conversation.cap_kept" if keeper.saved else "conversation.cap_unsaved"
        )
        render.alert("warning", t(lang, notice.key, **notice.params), icon=":material/inventory_2:")


def class_link() -> str | None:
    """The bare app URL (no ``?c=``, no fragment): the link a teacher shares, where each student
    starts their own."""
    url = st.context.url
    if not isinstance(url, str) or not url:  # None where no browser sent one (AppTest)
        return None
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def render_class_link(lang: str) -> None:
    link = class_link()
    if link is None:
        return
    with st.expander(t(lang, "conversation.class_link"), icon=":material/share:"):
        render.caption(t(lang, "conversation.class_link_help"))
        render.code(link, language=None)
