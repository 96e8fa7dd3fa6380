"""A new process runs the page once, as a visitor would, before ``memora.serve`` sends it students.

A Streamlit process answers its health check as soon as it listens, but it imports the page's
modules (pandas, the SDK, the tokenizer, the store's driver) only in its first run: about a
CPU-second on the machine we measure on. A rolling restart that stopped an old process as soon as
its successor answered would send the old one's students to a process that then pays that second
with all of them waiting. ``run_page_once`` opens the page on the process's own port (not through
Caddy, so no student's cookie is pinned to it), as a browser tab with no cookies: one full run, then
the websocket closes. Such a visit saves nothing: a conversation is stored only once it has a
message.

It also checks what the process would show a student. A page that draws an error (bad settings, a
store it cannot open) or raises fails the visit with ``FirstRunFailed``, whose text is the first
line of what the page showed; the page never shows a key or a password, so it is safe to log.

It checks the page, not who serves it: whatever answers on the port is visited. ``memora.serve``
first checks that the process it started holds that port itself (``memora.app.ports.listens``), so
an orphan of an earlier start that answers there is never taken for its own.
"""

from __future__ import annotations

import time

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

RUN_WAIT_S = 60.0
"""A bound on a first run that hangs, far above the seconds a cold one takes."""


class FirstRunFailed(RuntimeError):
    """The process did not run the page cleanly; the message says what happened, in one line."""


def run_page_once(port: int, limit_s: float = RUN_WAIT_S) -> float:
    """Opens the page of the Streamlit process on 127.0.0.1:``port`` and waits for its first full
    run; returns the seconds it took. Raises ``FirstRunFailed`` when the process cannot be reached,
    the run does not finish within ``limit_s``, or the page draws an error or an exception."""
    began = time.monotonic()
    request = BackMsg()
    request.rerun_script.query_string = ""
    request.rerun_script.page_script_hash = ""
    try:
        with connect(
            f"ws://127.0.0.1:{port}/_stcore/stream",
            subprotocols=["streamlit"],
            origin=f"http://127.0.0.1:{port}",
            open_timeout=limit_s,
            max_size=None,
        ) as page:
            page.send(request.SerializeToString())
            while (left := limit_s - (time.monotonic() - began)) > 0:
                message = ForwardMsg()
                message.ParseFromString(page.recv(timeout=left))
                _check(message)
                if message.WhichOneof("type") == "script_finished":
                    if message.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                        return time.monotonic() - began
                    if message.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                        raise FirstRunFailed("the page's script does not compile")
    except TimeoutError:
        pass
    except (OSError, WebSocketException) as error:
        raise FirstRunFailed(f"the page could not be opened ({type(error).__name__})") from error
    raise FirstRunFailed(f"the page's first run did not finish within {limit_s:.0f} s")


def _check(message: ForwardMsg) -> None:
    """Raises when ``message`` draws an error or an exception, which no student should meet on a
    fresh page."""
    if message.WhichOneof("type") != "delta" or message.delta.WhichOneof("type") != "new_element":
        return
    element = message.delta.new_element
    which = element.WhichOneof("type")
    if which == "exception":
        raise FirstRunFailed(
            f"the page raised {element.exception.type}: {_first_line(element.exception.message)}"
        )
    if which == "alert" and element.alert.format == Alert.ERROR:
        raise FirstRunFailed(f"the page shows an error: {_first_line(element.alert.body)}")


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 160 else line[:159] + "…"
