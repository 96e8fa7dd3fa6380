"""A browser tab reduced to Streamlit's websocket protocol, for tests that go through a real proxy (Caddy).

It sends what the page's frontend sends (a full run, with the query string and the chat input's value) and reads
every element each run draws. It runs no JavaScript: the cookies a browser would hold (Caddy's ``memora_lb``, the
page's ``memora_browser``) are given to it. ``open_tab`` keeps the websocket for several runs, and can ask for a
session back by its id, as the frontend does when its websocket reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

RUN_WAIT_S = 60.0
"""A bound on a hang while a run is drawn, not a measure of speed."""
TEXT_KINDS = ("markdown", "text", "alert", "exception")


async def visit(port: int, cookies: dict[str, str], query: str = "", message: str | None = None) -> list[str]:
    """Opens the page on 127.0.0.1:``port`` with ``cookies`` and ``?query``, waits for its first full run, and sends
    ``message`` into the chat input when given (the reply is written on the server's thread); returns every text
    the first run drew."""
    async with open_tab(port, cookies) as tab:
        page = await tab.run(query)
        if message is not None:
            await tab.run(query, message)
        return page.texts


class Tab:
    """An open tab: its websocket, and what its last run said of the session (its id, its address's query)."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self._ws = ws
        self._last = _Page()

    @property
    def session_id(self) -> str:
        """The id of the session the server attached this websocket to (every run's ``new_session`` names it)."""
        return self._last.session_id

    @property
    def query(self) -> str:
        """The address's query string as the page last set it (``?c=`` once its conversation is saved)."""
        return self._last.query

    async def run(self, query: str | None = None, message: str | None = None) -> _Page:
        """One full run with ``?query`` (the page's own, when None) and ``message`` in the chat input; what it drew."""
        sent = self.query if query is None else query
        page = await _run(self._ws, _rerun(sent, self._last.script_hash, self._last.chat_input, message))
        page.query = page.query if page.query_changed else sent
        self._last = page
        return page


@contextlib.asynccontextmanager
async def open_tab(port: int, cookies: dict[str, str], session: str | None = None) -> AsyncIterator[Tab]:
    """A websocket to the page on 127.0.0.1:``port`` with ``cookies``; ``session``: the id of a session to ask for
    back, where the frontend puts it on a reconnect (the third subprotocol, after the XSRF token, here its
    placeholder). Which session the server gave is ``Tab.session_id``, after the first run."""
    offered = ["streamlit", "PLACEHOLDER_AUTH_TOKEN", session] if session else ["streamlit"]
    async with websockets.connect(
        f"ws://127.0.0.1:{port}/_stcore/stream",
        subprotocols=offered,
        max_size=None,
        origin=f"http://127.0.0.1:{port}",
        ping_interval=None,
        additional_headers={"Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items())},
    ) as ws:
        yield Tab(ws)


class _Page:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.html: list[str] = []  # the bodies of st.html: the page's cookie script, which this tab does not run
        self.chat_input: str | None = None
        self.script_hash = ""
        self.session_id = ""
        self.query = ""
        self.query_changed = False


async def _run(ws: websockets.ClientConnection, request: bytes) -> _Page:
    """Sends ``request`` and reads until a full run has finished."""
    await ws.send(request)
    page = _Page()

    async def read() -> _Page:
        async for raw in ws:
            message = ForwardMsg()
            message.ParseFromString(raw)
            kind = message.WhichOneof("type")
            if kind == "new_session":
                page.script_hash = message.new_session.page_script_hash
                page.session_id = message.new_session.initialize.session_id
            elif kind == "page_info_changed":
                page.query, page.query_changed = message.page_info_changed.query_string, True
            elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                which = element.WhichOneof("type")
                if which == "chat_input":
                    page.chat_input = element.chat_input.id
                elif which == "html":
                    page.html.append(element.html.body)
                elif which in TEXT_KINDS:
                    page.texts.append(element.exception.message if which == "exception" else getattr(element, which).body)
            elif kind == "script_finished" and message.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                return page
        raise ConnectionError("the server closed the page's websocket")

    return await asyncio.wait_for(read(), RUN_WAIT_S)


def _rerun(query: str, script_hash: str, chat_input: str | None, text: str | None) -> bytes:
    message = BackMsg()
    state = message.rerun_script
    state.query_string = query
    state.page_script_hash = script_hash
    if text is not None:
        if chat_input is None:
            raise RuntimeError("the page drew no chat input")
        widget = state.widget_states.widgets.add()
        widget.id = chat_input
        widget.chat_input_value.data = text
    return message.SerializeToString()
