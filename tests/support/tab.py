"""A browser tab reduced to Streamlit's websocket protocol, for tests that go through a real proxy (Caddy).

It sends what the page's frontend sends (a full run, with the query string and the chat input's value) and reads
every element each run draws. It runs no JavaScript: the cookies a browser would hold (Caddy's ``memora_lb``, the
page's ``memora_browser``) are given to it.
"""

from __future__ import annotations

import asyncio

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
    origin = f"http://127.0.0.1:{port}"
    header = "; ".join(f"{name}={value}" for name, value in cookies.items())
    async with websockets.connect(
        f"ws://127.0.0.1:{port}/_stcore/stream",
        subprotocols=["streamlit"],
        max_size=None,
        origin=origin,
        ping_interval=None,
        additional_headers={"Cookie": header},
    ) as ws:
        page = await _run(ws, _rerun(query, "", None, None))
        if message is not None:
            await _run(ws, _rerun(query, page.script_hash, page.chat_input, message))
        return page.texts


class _Page:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.chat_input: str | None = None
        self.script_hash = ""


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
            elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                which = element.WhichOneof("type")
                if which == "chat_input":
                    page.chat_input = element.chat_input.id
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
