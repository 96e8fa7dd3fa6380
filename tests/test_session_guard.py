"""A session answers only to its browser (issue 44): a websocket that names another browser's session gets its own.

Streamlit 1.67 attaches a websocket that names a session id (the reconnect path) to that session whenever both
present the same ``user_info``, which without Streamlit's login is ``{}`` for everyone: student B, with A's session
id, drove A's live session. ``memora.app.page.session_guard`` lets a websocket attach only with the session's own
``memora_browser`` cookie. Here: its one decision, the Streamlit internals it wraps (so that an upgrade that changes
them fails here, by name), and two students against a real ``streamlit run`` over Streamlit's websocket protocol.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import os
import re
from dataclasses import fields
from urllib.parse import urlsplit

import pytest
import streamlit
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext, get_script_run_ctx
from streamlit.runtime.session_manager import ClientContext, SessionClient
from streamlit.web.server.starlette import starlette_websocket

from benchmarks.harness.processes import ROOT, streamlit_run
from memora.app.page import session_guard
from memora.app.page.browser import COOKIE
from memora.app.page.session_guard import CONNECT_PARAMETERS, SessionOwners, may_attach, presented_owner
from memora.classroom.store.owner import new_browser_secret, owner_of
from tests.support.tab import open_tab

A_SECRET, B_SECRET = new_browser_secret(), new_browser_secret()
A, B = owner_of(A_SECRET), owner_of(B_SECRET)
PHONE = "My phone number is 0912-345-678, please remember it."


# -- the decision --------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_only_the_sessions_own_browser_may_attach():
    assert may_attach(A, A)
    assert not may_attach(A, B), "another browser's cookie"
    assert not may_attach(A, None), "no cookie of ours"
    assert not may_attach(None, A), "a session bound to no browser is attached by nobody"
    assert not may_attach(None, None), "two websockets without a cookie are not one browser"


@pytest.mark.unit
def test_the_presented_owner_is_the_hash_of_a_well_formed_secret_only():
    assert presented_owner({COOKIE: A_SECRET, "memora_lb": "x"}) == A
    assert presented_owner({COOKIE: A}) is None, "an owner hash is not a secret: a store's reader cannot present it"
    assert presented_owner({COOKIE: A_SECRET[:-1]}) is None
    assert presented_owner({"other": A_SECRET}) is None
    assert presented_owner({}) is None and presented_owner(None) is None


@pytest.mark.unit
def test_a_session_is_bound_until_its_session_object_goes():
    class Session:  # stands for Streamlit's AppSession: any object that can be weakly referenced
        pass

    owners = SessionOwners()
    session = Session()
    owners.bind("s-1", A, session)
    assert owners.owner("s-1") == A and owners.owner("s-2") is None
    owners.bind("s-1", B, session)  # Forget this browser: the page's new secret
    assert owners.owner("s-1") == B and len(owners) == 1
    del session
    gc.collect()
    assert owners.owner("s-1") is None and len(owners) == 0, "the map holds no id of a session Streamlit let go"


@pytest.mark.unit
def test_a_page_that_names_a_session_this_process_does_not_know_came_back_from_a_process_that_stopped():
    """A rolling restart: the page's websocket names the session the stopped process served. This process never made
    it, so the page gets a fresh session, marked as come back (``came_back``: the page then says her last reply was
    finished while the server restarted). A reconnect to a session this process keeps, and a page that names none (a
    reload, a new tab), are not."""

    class Session:  # stands for Streamlit's AppSession
        pass

    class Handshake:  # a ClientContext: only its cookies are read
        def __init__(self, secret: str) -> None:
            self.cookies = {COOKIE: secret}

    class Client:
        def __init__(self, secret: str) -> None:
            self.client_context = Handshake(secret)

    sessions: dict[str, Session] = {}

    class Runtime:  # the wrapper's view of Streamlit's: its connect and its sessions
        def get_app_session(self, session_id: str) -> Session | None:
            return sessions.get(session_id)

    def connect(client, user_info, existing_session_id=None, session_id_override=None) -> str:
        if existing_session_id in sessions:
            return existing_session_id
        session_id = f"s-{len(sessions) + 1}"
        sessions[session_id] = Session()
        return session_id

    guarded = session_guard._guarded(Runtime(), connect)  # type: ignore[arg-type]
    here = guarded(Client(A_SECRET), {})
    assert here not in session_guard.RETURNED, "a page that names no session"
    assert guarded(Client(A_SECRET), {}, existing_session_id=here) == here and here not in session_guard.RETURNED
    back = guarded(Client(A_SECRET), {}, existing_session_id="served-by-the-stopped-process")
    assert back != "served-by-the-stopped-process" and back in session_guard.RETURNED
    assert guarded(Client(A_SECRET), {}, existing_session_id=back) == back, "her own session is hers again"
    del sessions[back]
    gc.collect()
    assert back not in session_guard.RETURNED, "the mark goes with its session"


# -- the Streamlit internals it relies on (its docstring's list): an upgrade that changes them fails here -----------


@pytest.mark.unit
def test_streamlit_still_has_the_internals_the_guard_wraps():
    pinned = next(line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("streamlit"))
    assert pinned == "streamlit>=1.67,<1.68" and streamlit.__version__.startswith("1.67."), (
        "a new Streamlit minor: recheck memora/app/page/session_guard.py's list of internals, then this test"
    )
    # 1. Runtime: the method wrapped, with the parameters passed on, and the lookups the guard makes.
    assert tuple(inspect.signature(Runtime.connect_session).parameters) == CONNECT_PARAMETERS
    assert inspect.signature(Runtime.connect_session).parameters["existing_session_id"].default is None
    assert tuple(inspect.signature(Runtime.get_app_session).parameters) == ("self", "session_id")
    assert callable(Runtime.exists) and callable(Runtime.instance)
    # 2. The websocket endpoint calls connect_session on the runtime object at each connect, with the id it was given.
    endpoint = inspect.getsource(starlette_websocket.create_websocket_handler)
    assert "runtime.connect_session(" in endpoint and "existing_session_id=existing_session_id" in endpoint
    assert "existing_session" in inspect.getsource(starlette_websocket._parse_subprotocols)
    # 3. The handshake's cookies, on the session's client.
    assert isinstance(inspect.getattr_static(SessionClient, "client_context"), property)
    assert isinstance(inspect.getattr_static(ClientContext, "cookies"), property)
    # 4. The running script's session id.
    assert "session_id" in {field.name for field in fields(ScriptRunContext)}
    assert "suppress_warning" in inspect.signature(get_script_run_ctx).parameters


@pytest.mark.unit
def test_the_guard_leaves_apptests_stand_in_runtime_alone(monkeypatch):
    from unittest.mock import MagicMock

    stand_in = MagicMock(spec=Runtime)
    monkeypatch.setattr(Runtime, "_instance", stand_in)
    assert session_guard.install() is False and not session_guard.installed()
    assert not inspect.isfunction(stand_in.connect_session), "the stand-in's own mock, not a wrapper"


# -- two students against a real `streamlit run` ---------------------------------------------------------------------


def page_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    return {**env, "MEMORA_DATA_DIR": str(tmp_path), "MEMORA_BACKEND": "offline"}


def shows(page, text: str) -> bool:
    return any(text in shown for shown in page.texts)


async def two_students(port: int) -> None:
    """A talks, then B (her own cookie) names A's session id: while A's websocket is open, after it closed, and
    with no cookie at all; then A comes back with her cookie and id, and a fresh tab of A's names none."""
    async with open_tab(port, {COOKIE: A_SECRET}) as a:
        await a.run("")
        await a.run(message=PHONE)
        assert shows(await a.run(), PHONE) and a.query.startswith("c="), "A's message is on her page, and saved"
        a_session, a_query = a.session_id, a.query
        async with open_tab(port, {COOKIE: B_SECRET}, session=a_session) as b:
            page = await b.run(a_query)  # with A's ?c= too: as if B had her whole address
            assert b.session_id and b.session_id != a_session, "B, while A's tab is open: a session of her own"
            assert not shows(page, PHONE) and shows(page, "not one of this browser's"), "nothing of A's, only a notice"
        page = await a.run()
        assert a.session_id == a_session and shows(page, PHONE), "A's live session is still hers: B took nothing from her"
    # A's tab closed: Streamlit keeps her session for a reconnect (server.disconnectedSessionTTL).
    for cookies, query in (({COOKIE: B_SECRET}, a_query), ({}, "")):
        async with open_tab(port, cookies, session=a_session) as other:
            page = await other.run(query)
            assert other.session_id and other.session_id != a_session, f"{cookies or 'no cookie'}: a session of its own"
            assert not shows(page, PHONE), f"{cookies or 'no cookie'}: nothing of A's"
    async with open_tab(port, {COOKIE: A_SECRET}, session=a_session) as back:
        # No ?c=: only her session's own memory can show her message; a new session would start an empty conversation.
        page = await back.run("")
        assert back.session_id == a_session and shows(page, PHONE), "A, with her cookie and her id, has her session back"
    async with open_tab(port, {COOKIE: A_SECRET}) as fresh:
        page = await fresh.run("")
        assert fresh.session_id != a_session and not shows(page, PHONE), "without her id a run with no ?c= starts anew"


async def first_visit(port: int) -> None:
    """A first visit sends no cookie: the page makes the secret and sets it from the browser (a script this tab reads
    instead of running); the session is bound to it, so the browser's reconnect, which now sends it, gets its session
    back, and another browser's does not."""
    async with open_tab(port, {}) as tab:
        first = await tab.run("")
        await tab.run(message=PHONE)
        assert shows(await tab.run(), PHONE)
        session_id = tab.session_id
    secrets = {found for script in first.html for found in re.findall(r'secret = "([A-Za-z0-9_-]{43})"', script)}
    assert len(secrets) == 1, "the page's cookie script names the secret it made"
    async with open_tab(port, {COOKIE: B_SECRET}, session=session_id) as other:
        page = await other.run("")
        assert other.session_id != session_id and not shows(page, PHONE), "another browser: a session of its own"
    async with open_tab(port, {COOKIE: secrets.pop()}, session=session_id) as back:
        page = await back.run("")
        assert back.session_id == session_id and shows(page, PHONE), "the browser that took the page's cookie is back"


def test_a_first_visits_session_belongs_to_the_cookie_its_page_set(tmp_path):
    with streamlit_run(page_env(tmp_path), tmp_path / "streamlit.log") as url:
        asyncio.run(first_visit(urlsplit(url).port))


def test_a_websocket_naming_another_students_session_gets_a_fresh_one_and_hers_answers_only_to_her(tmp_path):
    with streamlit_run(page_env(tmp_path), tmp_path / "streamlit.log") as url:
        asyncio.run(two_students(urlsplit(url).port))
    refusals = (tmp_path / "streamlit.log").read_text().count("A websocket named a session that is not its browser's")
    assert refusals == 3, "the server's log counts each refused attach, B's two and the cookieless one"


# -- two students in Chromium: the frontend's own reconnect, and a frontend made to name another student's session ---

SOCKETS = """(() => {
  // Keeps this tab's websockets, so that the test can drop one as a network would; with window.memoraNamedSession set,
  // the frontend's websocket names that session id where it names its own on a reconnect (its third subprotocol).
  const Native = window.WebSocket;
  window.memoraSockets = [];
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      const named = window.memoraNamedSession;
      super(url, named ? [protocols[0], protocols[1] || "PLACEHOLDER_AUTH_TOKEN", named] : protocols);
      window.memoraSockets.push(this);
    }
  };
})();"""


def session_ids(person) -> list[str]:
    """The session id of each run the server sent ``person``'s tab, in order (every ``new_session`` names it)."""
    found = []
    for frame in person.frames:
        message = ForwardMsg()
        message.ParseFromString(frame)
        if message.WhichOneof("type") == "new_session":
            found.append(message.new_session.initialize.session_id)
    return found


@pytest.mark.browser
def test_in_chromium_a_dropped_websocket_gets_its_session_back_and_another_students_tab_cannot_take_it(tmp_path):
    from benchmarks.harness.browser import MESSAGES, OFFLINE_OPENING, Person, chat, chat_texts, chromium, page_env, require_browser

    require_browser()
    with streamlit_run(page_env(tmp_path), tmp_path / "streamlit.log", "--server.fileWatcherType", "none") as url, chromium() as browser:
        own = browser.new_context(viewport={"width": 1300, "height": 1000})
        own.add_init_script(SOCKETS)
        ana = Person(None, url, context=own).ready()  # a first visit: her page makes her cookie
        chat(ana.page, [PHONE], OFFLINE_OPENING)
        ana_session = session_ids(ana)[-1]
        assert set(session_ids(ana)) == {ana_session}

        other = browser.new_context(viewport={"width": 1300, "height": 1000})
        other.add_init_script(f"window.memoraNamedSession = {json.dumps(ana_session)};")
        other.add_init_script(SOCKETS)
        ben = Person(None, ana.page.url, context=other).ready()  # her whole address, and her session's id
        assert ana_session not in session_ids(ben) and session_ids(ben), "Ben's tab was given a session of its own"
        assert ben.page.locator(MESSAGES).count() == 0 and PHONE.encode() not in ben.seen()
        assert "not one of this browser's" in ben.page.locator("body").inner_text()

        # Ana's websocket drops (her wifi): the frontend reconnects, naming her session, with her cookie.
        frames_before = len(ana.frames)
        ana.page.evaluate("window.memoraSockets.at(-1).close()")
        ana.page.wait_for_function("() => window.memoraSockets.length === 2 && window.memoraSockets[1].readyState === 1")
        chat(ana.page, ["And what did I ask you first?"], OFFLINE_OPENING)
        assert len(ana.frames) > frames_before and set(session_ids(ana)) == {ana_session}, "the same session, never another"
        assert PHONE in chat_texts(ana.page)[0] and len(chat_texts(ana.page)) == 4
