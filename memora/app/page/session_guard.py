"""A Streamlit session answers only to its browser: a websocket may take over a session only with
that session's cookie.

Streamlit lets a reconnecting websocket name the session it had (the third entry of its
``Sec-WebSocket-Protocol`` header), and attaches it to that session, live or kept for
`server.disconnectedSessionTTL`, whenever the two connections present the same ``user_info``.
Without Streamlit's own login every browser's ``user_info`` is ``{}``, so any websocket that
presented another student's session id drove her live session: her memory, her conversation and her
secret (issue 44). The id is random and never shown, so this was conditional, but a session holds
the key to its browser's conversations.

The rule, one pure decision (``may_attach``): a websocket attaches to an existing session only when
it presents the ``memora_browser`` cookie of the browser that session belongs to; any other cookie,
no cookie, or a session bound to no browser gets a fresh session instead, as if it had named none
(the session it named is left as it was). A session belongs to:

- the owner of the cookie its first websocket presented (``presented_owner``), from its creation;
- then the owner of the secret its page holds, bound on every run (``bind_this_session``): a first
  visit's page makes the secret itself and sets the cookie from the browser, and *Forget this
  browser* replaces it, so the session follows the cookie the page gave its browser. The page's
  secret is either the cookie its browser sent or one only this session made, so a session is never
  bound to a browser that did not hold its secret.

A session bound to nobody (opened without a cookie of ours and not yet run, or with the store off,
where the page sets no cookie) is attached by nobody: its websocket's drop costs a fresh session,
which with the store off starts a new conversation, as a reload does there. A browser that blocks
cookies is in the same case.

The owners are kept per process, by session id, for as long as Streamlit keeps the session object:
each entry goes with its ``AppSession`` (``weakref.finalize``). Processes behind Caddy share nothing
here, and need nothing: a session id is only known to the process that made it.

**Streamlit internals this module relies on** (Streamlit 1.67, the pinned minor;
``tests/test_session_guard.py`` asserts each of their shapes, so an upgrade that changes one fails
there, loudly):

1. ``streamlit/runtime/runtime.py``: ``Runtime.exists()``, ``Runtime.instance()``,
   ``Runtime.get_app_session(id)``, and ``Runtime.connect_session(self, client, user_info,
   existing_session_id=None, session_id_override=None)``, which returns the session's id.
   ``install`` replaces the bound method on the process's one ``Runtime`` instance with a wrapper
   that passes ``existing_session_id=None`` when ``may_attach`` refuses.
2. ``streamlit/web/server/starlette/starlette_websocket.py``: ``create_websocket_handler`` calls
   ``runtime.connect_session(client=..., user_info=..., existing_session_id=...)`` by attribute on
   the same ``Runtime`` object, at every websocket's connect, so the wrapper sees every attach; the
   reconnect id comes from the third ``Sec-WebSocket-Protocol`` entry (``_parse_subprotocols``).
3. ``streamlit/runtime/session_manager.py``: ``SessionClient.client_context.cookies``, the cookies
   of the websocket's handshake (what ``st.context.cookies`` reads).
4. ``streamlit/runtime/scriptrunner_utils/script_run_context.py``:
   ``get_script_run_ctx().session_id``.

What an upgrade must recheck, beyond that test: that no other path attaches a websocket to an
existing session without ``Runtime.connect_session`` (a second server, a new reconnect message);
that the websocket handler still looks ``connect_session`` up on the instance at call time (a
handler that captured the bound method before the page first runs would bypass the wrapper); and
that ``AppTest``'s stand-in ``Runtime`` (a ``MagicMock``) is still told apart by ``install`` (it is
left alone).
"""

from __future__ import annotations

import functools
import hmac
import inspect
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from memora.app.page.browser import COOKIE
from memora.classroom.store.owner import is_browser_secret, owner_of

log = logging.getLogger(__name__)

CONNECT_PARAMETERS = ("self", "client", "user_info", "existing_session_id", "session_id_override")
"""``Runtime.connect_session``'s parameters, in order, as the wrapper passes them on (Streamlit
1.67)."""
_GUARD_MARK = "_memora_session_guard"
"""Set on the wrapper, so that a second ``install`` in the same process (every run calls it) wraps
nothing twice."""


def presented_owner(cookies: Mapping[str, str] | None) -> str | None:
    """The owner hash of the browser secret in a handshake's ``cookies``; None without cookies,
    without ours, or with a value that is not a secret Memora makes (a forged or truncated cookie
    owns nothing, as on the page)."""
    secret = None if cookies is None else cookies.get(COOKIE)
    return owner_of(secret) if is_browser_secret(secret) else None


def may_attach(session_owner: str | None, presented: str | None) -> bool:
    """Whether a websocket presenting ``presented`` (an owner hash, or None) may take over a session
    bound to ``session_owner``: only the same owner. A session bound to nobody is attached by
    nobody, and a websocket without a cookie of ours attaches to nothing, not even to another
    session without one. Compared in constant time."""
    if session_owner is None or presented is None:
        return False
    return hmac.compare_digest(session_owner, presented)


class SessionOwners:
    """Which browser owns each session of this process: session id -> owner hash. Thread-safe: the
    websocket's connect writes on the server's event loop, the page's runs on their script
    threads."""

    def __init__(self) -> None:
        # Re-entrant: a collection may run ``_forget`` on this very thread while it holds the lock
        # (at any allocation).
        self._lock = threading.RLock()
        self._owners: dict[str, str] = {}

    def owner(self, session_id: str) -> str | None:
        """The owner ``session_id`` is bound to; None for a session bound to nobody, or gone."""
        with self._lock:
            return self._owners.get(session_id)

    def bind(self, session_id: str, owner: str, session: object) -> None:
        """Binds ``session_id`` to ``owner``, replacing any earlier owner. ``session`` is
        Streamlit's session object: the entry goes when it is collected, so the map holds no more
        ids than Streamlit holds sessions."""
        with self._lock:
            known = session_id in self._owners
            self._owners[session_id] = owner
        if not known:
            weakref.finalize(session, self._forget, session_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._owners)

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._owners.pop(session_id, None)


OWNERS = SessionOwners()
"""This process's sessions and their owners."""


class ReturnedSessions:
    """The sessions of this process made for a websocket that named a session this process does not
    know: a page that came back after the process that served it stopped (a rolling restart, a crash
    behind the balancer, a restart of a one-process class). Thread-safe, and each entry goes with
    its ``AppSession``, as in ``SessionOwners``.

    Edge case: a session this process dropped after `server.disconnectedSessionTTL` (a laptop asleep
    for minutes) reads the same; a page that reloads (F5) or a new tab names no session and is never
    here."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ids: set[str] = set()

    def add(self, session_id: str, session: object) -> None:
        with self._lock:
            known = session_id in self._ids
            self._ids.add(session_id)
        if not known:
            weakref.finalize(session, self._forget, session_id)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._ids

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._ids.discard(session_id)


RETURNED = ReturnedSessions()
"""This process's sessions that a page opened after its own process stopped (``came_back``)."""
_INSTALLING = threading.Lock()


def install() -> bool:
    """Puts the guard on this process's Streamlit ``Runtime``, once; every later call is a no-op.
    The page calls it on every run, so the guard is on from the process's first page on: a session
    connected before that has no owner until its page runs, so nobody can attach to it meanwhile.
    Returns whether the guard is on: False where there is no real runtime (``AppTest`` runs the page
    against a stand-in, which is left alone).

    Raises RuntimeError when ``Runtime.connect_session`` no longer has the parameters the wrapper
    passes on: a Streamlit upgrade changed it, and the guard must be rechecked before the page
    serves anyone."""
    if not Runtime.exists():
        return False
    runtime = Runtime.instance()
    with _INSTALLING:
        connect = runtime.connect_session
        if getattr(connect, _GUARD_MARK, None) is True:
            return True
        if not inspect.ismethod(connect) or connect.__func__ is not Runtime.connect_session:
            return False  # not Streamlit's own method on a real Runtime: AppTest's stand-in
        _check_shape()
        runtime.connect_session = _guarded(runtime, connect)  # type: ignore[method-assign]
        return True


def installed() -> bool:
    """Whether this process's runtime has the guard on."""
    return (
        Runtime.exists() and getattr(Runtime.instance().connect_session, _GUARD_MARK, None) is True
    )


def bind_this_session(secret: str) -> None:
    """Binds the session running this script to ``secret``'s owner: the secret its page holds and
    sets as the cookie, so that the browser's next websocket, which presents that cookie, may take
    the session back. Call it on every run; a no-op without the guard (``AppTest``) or outside a
    script run."""
    context = get_script_run_ctx(suppress_warning=True)
    if context is None or not installed():
        return
    session = Runtime.instance().get_app_session(context.session_id)
    if session is not None:
        # None: this session's websocket has just closed; its connect-time owner stands
        OWNERS.bind(context.session_id, owner_of(secret), session)


def came_back() -> bool:
    """Whether the session running this script was made for a page that came back from a process
    that stopped: its websocket named a session this process does not know (``ReturnedSessions``).
    False without the guard (``AppTest``) or outside a script run."""
    context = get_script_run_ctx(suppress_warning=True)
    return context is not None and context.session_id in RETURNED


def _check_shape() -> None:
    parameters = tuple(inspect.signature(Runtime.connect_session).parameters)
    if parameters != CONNECT_PARAMETERS:
        raise RuntimeError(
            f"Runtime.connect_session takes {parameters}, not {CONNECT_PARAMETERS}: "
            "this Streamlit is not the one memora.app.page.session_guard was written for; "
            "recheck the internals its docstring lists"
        )


def _guarded(runtime: Runtime, connect: Callable[..., str]) -> Callable[..., str]:
    """``connect`` (the runtime's own ``connect_session``), asking ``may_attach`` before it attaches
    to a session."""

    @functools.wraps(connect)
    def connect_session(
        client: Any,
        user_info: Any,
        existing_session_id: str | None = None,
        session_id_override: str | None = None,
    ) -> str:
        context = client.client_context
        presented = presented_owner(None if context is None else context.cookies)
        # A session id this process never made, or no longer keeps: the page was served by a process
        # that stopped.
        unknown_here = bool(existing_session_id) and OWNERS.owner(existing_session_id or "") is None
        unknown_here = unknown_here and runtime.get_app_session(existing_session_id or "") is None
        if existing_session_id and not may_attach(OWNERS.owner(existing_session_id), presented):
            # The id is not logged: it is the key to a session, and the refused websocket's browser
            # is not its own.
            log.warning(
                "A websocket named a session that is not its browser's: "
                "it gets a new session, the other is untouched"
            )
            existing_session_id = None
        session_id = connect(
            client=client,
            user_info=user_info,
            existing_session_id=existing_session_id,
            session_id_override=session_id_override,
        )
        if presented is not None and OWNERS.owner(session_id) is None:
            # a new session: its first websocket's browser
            session = runtime.get_app_session(session_id)
            if session is not None:
                OWNERS.bind(session_id, presented, session)
        if unknown_here and session_id != existing_session_id:
            session = runtime.get_app_session(session_id)
            if session is not None:
                RETURNED.add(session_id, session)
        return session_id

    setattr(connect_session, _GUARD_MARK, True)
    return connect_session
