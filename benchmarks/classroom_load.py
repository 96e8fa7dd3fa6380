"""A classroom against one server: N simulated students on Streamlit's own websocket protocol.

Run from the repository root::

    python benchmarks/classroom_load.py --students 10 20 40
    python benchmarks/classroom_load.py --students 40 --apps /tmp/memora-main .   # two checkouts side by side
    python benchmarks/classroom_load.py --students 40 --offline
    python benchmarks/classroom_load.py --students 40 --model-port 8555 \
        --target "1 process=http://127.0.0.1:8501=111" --target "2 behind caddy=http://127.0.0.1:8080=222,333"
    MEMORA_STORE_URL=postgresql://... python benchmarks/classroom_load.py --students 80 --serve 1 2
    MEMORA_STORE_URL=postgresql://... python benchmarks/classroom_load.py --students 80 --serve 2 --rolling-restart 15
    MEMORA_STORE_URL=postgresql://...:5434/... python benchmarks/classroom_load.py --students 24 --serve 2 \
        --rolling-restart 2 --restart-postgres 15/roll

``--serve N``: the class as a teacher starts a big one, ``python -m memora.serve --processes N`` (N Streamlit
processes behind Caddy with the shipped Caddyfile) on the PostgreSQL database of ``MEMORA_STORE_URL``, each count
in turn with a schema of its own, every figure summed over its N processes. ``--rolling-restart S``: instead of
the usual waves, one wave of students for each way a class loses processes mid-lesson (``FAILOVERS``), each on a
class started afresh, from S seconds into the message phase: one process stopped (SIGTERM, as a crash or a stop by
hand leaves it; ``memora.serve`` starts it again), every process stopped in turn by hand (each after the last
answers again), and ``kill -HUP`` to ``memora.serve`` (its rolling restart: each successor on the spare port runs
the page before the old process stops). A student whose websocket closes does what Streamlit's page does while a
reply is being written: it reconnects through Caddy (its sticky cookie re-pinned to a live process) and runs the
page again; "page back" is the time from the close to that run's end (an idle page reconnects without a run until
the student acts, so for idle students it is an upper bound). Its turn in flight is counted failed ("connection closed"). Each student
keeps what a browser keeps, the page's ``memora_browser`` cookie and the ``?c=`` of its address, so the page that
comes back on another process opens the student's conversation from PostgreSQL: "conversations back" counts the
pages back (of those that had sent a message) whose run drew one of the student's earlier messages.
``--restart-postgres VERSION/NAME`` also restarts that PostgreSQL cluster (``pg_ctlcluster VERSION NAME restart``, as
root or its owner) in each wave, ``--restart-postgres-after`` seconds after the roll's first stop, while the stopping
process drains its students' replies and they reconnect: it must be the cluster ``MEMORA_STORE_URL`` names (checked by
port with ``pg_lsclusters``), and one of its own, since every connection to it drops. The report says when each
restart began, counted from the roll's start, and how long it took.

Each student opens a websocket to ``/_stcore/stream``, as a browser tab does, asks for
the first run, and then sends ``--messages`` chat messages (a ``rerun_script`` BackMsg
carrying the chat input's value), waiting a random think time (uniform, 0.5-1.5x
``--think``) before each, and for its reply and the page to settle after each. The
reply is written on a thread the session owns and drawn by a ``run_every`` fragment;
in Streamlit the fragment's periodic runs are driven by the browser, so a student does
what Streamlit's frontend (``App.tsx``) does: an ``auto_rerun`` ForwardMsg starts a
timer per fragment id that sends a ``rerun_script`` with that ``fragment_id`` and
``is_auto_rerun`` every interval (registering the same interval again leaves the timer
alone); ``stop_auto_rerun`` cancels the named timers, and the ``new_session`` of a full
run (one whose metadata names no fragment) cancels them all, since that run registers
afresh the fragments it still draws. The page is settled, and the next message may be
sent, once a full run has finished with the chat input drawn enabled after the reply
was whole (the input is disabled while a reply is written). Then, as a curious student
does, it opens the newest turn's box ("Turn N: tokens and context") and waits for the
run that draws it; a box it opened stays open, and every later run sends its state, as
the browser sends every widget's. A box the page draws without an open state of its own
(a plain ``st.expander``, before issue 43) is opened in the browser alone and costs the
server nothing, so there is nothing to send: "boxes opened" counts the opens the server ran. The
model is a streaming OpenAI-compatible chat server in a child process (the tests'
``ChatServer``, paced): the first token comes ``--latency`` seconds after the request,
then ``--rate`` tokens per second.

Measured per turn, on the client's clock:

- **first token**: send to the first ForwardMsg delta that carries reply text (the
  fake model's reply starts with ``Answer to <nonce>``, so the user's own message and
  earlier replies, redrawn by every run, are never mistaken for it). It arrives in a
  run of the tail fragment, so it includes the wait for the next timer tick.
- **done**: send to the delta that carries the reply's last token (in a fragment run,
  or in the full run that follows the reply's commit, whichever draws it first).
- In ``--offline`` mode there is no model: the offline engine explains the request it
  would have sent, computed at once. "First token" is then the first delta of that
  explanation after the user's message was drawn, and "done" the moment the page is
  settled again (a full run finished with the input enabled); both measure the server
  alone (queueing, script and fragment time).
- **fragment reruns per turn**: the auto-reruns the students sent, over the turns: how
  often the tail fragment ran for each reply.

Measured on the server, from ``/proc/PID``: CPU-seconds (user + system) per turn, over
the whole message phase divided by the turns sent; the CPU of opening the page, per
student; RSS idle, after one warm-up session, with every student connected, after they
all closed, and the same for a second wave of as many students. Streamlit keeps a
closed session ``server.disconnectedSessionTTL`` seconds for a reconnect (120 s by
default; the servers started here get ``--ttl``, default 2 s, and ``--target``
servers should be started with the same), and drops it only when a later session is
stored: "closed" is measured past the TTL, after one more student came and went.
Python seldom hands freed memory back to the system, so RSS does not fall when
sessions close; what shows whether they are given back is the second wave: it
reuses the first wave's memory, and its figures stay near the first's.

Timings depend on the machine and on what else runs on it; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import websockets  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from benchmarks.harness.processes import stop  # noqa: E402
from benchmarks.harness.servers import ChatServer, Handler, Recorded, _HTTPServer  # noqa: E402
from memora.app.page.browser import COOKIE  # noqa: E402
from memora.app.page.i18n import t  # noqa: E402
from memora.classroom.store.owner import new_browser_secret  # noqa: E402

OFFLINE_OPENING = "Offline mode, no language model"
TURN_TIMEOUT_S = 300.0
_TURN_MARK = 987654321
TURN_BOX = re.compile(re.escape(t("en", "chat.stats", turn=_TURN_MARK)).replace(str(_TURN_MARK), r"(\d+)"))
"""A turn box's title on the page (English, the default): its group is the turn's number."""
RUN_FINISHED = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)
"""A run, of the page or of a fragment, that drew all it had to."""
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


# -- the model: the tests' ChatServer, paced ---------------------------------------------


class PacedChatServer(ChatServer):
    """``ChatServer`` whose replies take time: ``latency_s`` to the first token, then ``rate`` tokens a second.

    The reply names the nonce of the user message it answers (``Answer to s3m1: ...
    (end s3m1)``), so a client can tell its own reply from any other text on the
    page. Summary requests (not streamed) wait ``latency_s`` and answer at once.
    """

    def __init__(self, latency_s: float, rate: float, reply_tokens: int, port: int = 0) -> None:
        super().__init__()
        self.latency_s = latency_s
        self.rate = rate
        self.reply_tokens = reply_tokens
        self.fixed_port = port

    def __enter__(self) -> PacedChatServer:
        # ChatServer binds port 0; a load balancer's backends, started first, need to know the port in advance.
        self._http = _HTTPServer(("127.0.0.1", self.fixed_port), Handler)
        self._http.model = self
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def answer(self, handler: Handler, request: Recorded) -> None:
        if not request.body.get("stream"):
            time.sleep(self.latency_s)
        super().answer(handler, request)

    def stream(self, handler: Handler, request: Recorded, *args: Any, **kwargs: Any) -> None:
        nonce = _nonce_in(request.body["messages"][-1]["content"])
        words = [f"Answer to {nonce}:", *([" practise"] * max(self.reply_tokens - 2, 0)), f" (end {nonce})"]
        handler.start_stream()

        def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "paced",
                "choices": choices,
                "usage": usage,
            }

        time.sleep(self.latency_s)
        for word in words:
            handler.send_event(chunk([{"index": 0, "delta": {"content": word}, "finish_reason": None}]))
            time.sleep(1 / self.rate)
        handler.send_event(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        if (request.body.get("stream_options") or {}).get("include_usage"):
            handler.send_event(chunk([], self._usage(request, "".join(words))))
        handler.send_event("[DONE]")
        handler.end_stream()


def _nonce_in(text: str) -> str:
    found = re.search(r"\bs\d+m\d+\b", text)
    return found.group(0) if found else "?"


def _serve_model(latency_s: float, rate: float, reply_tokens: int, port: int, ports: Any) -> None:
    with PacedChatServer(latency_s, rate, reply_tokens, port) as server:
        server.requests = _Discard()  # a long run must not keep every request
        ports.put(server.port)
        while True:
            time.sleep(3600)


class _Discard(list):
    def append(self, item: Any) -> None:
        pass


@contextlib.contextmanager
def model_server(latency_s: float, rate: float, reply_tokens: int, port: int = 0) -> Iterator[str]:
    """The paced model in a child process, so that its threads do not share the client's interpreter; yields its URL."""
    context = multiprocessing.get_context("fork")
    ports = context.Queue()
    process = context.Process(target=_serve_model, args=(latency_s, rate, reply_tokens, port, ports), daemon=True)
    process.start()
    try:
        yield f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    finally:
        process.terminate()
        process.join()


# -- the Streamlit server ----------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free now: ``memora.serve`` refuses to start (exit 2) on a taken one, and
    the port after a free one is often another program's on a shared machine."""
    import socket

    for _ in range(100):
        first = free_port()
        if first + count > 65536:
            continue
        taken = False
        for port in range(first + 1, first + count):
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    taken = True
        if not taken:
            return first
    raise RuntimeError(f"no {count} consecutive free ports")


@contextlib.contextmanager
def streamlit_server(app_dir: Path, env: dict[str, str], ttl_s: int, log: Path) -> Iterator[tuple[str, int]]:
    """`streamlit run streamlit_app.py` in ``app_dir``; yields its URL and process id once it answers."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "streamlit_app.py",
        "--server.headless=true",
        "--browser.gatherUsageStats=false",
        f"--server.port={port}",
        "--server.address=127.0.0.1",
        f"--server.disconnectedSessionTTL={ttl_s}",
    ]
    with open(log, "ab") as out:
        process = subprocess.Popen(command, cwd=app_dir, env=env, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(url, process)
            yield url, process.pid
        finally:
            stop(process)


def wait_until_healthy(url: str, process: subprocess.Popen | None = None, limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
            if response.status == 200:
                return
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}")
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {limit_s} s")


SERVE_STOP_S = 60.0
"""How long a stop waits for ``memora.serve``: above its own wait for its processes at the default grace (the grace
plus 13 s, ``memora.classroom.grace.exit_within_s``)."""


@dataclass(frozen=True)
class Served:
    """``python -m memora.serve`` running: Caddy's URL, the command, its log and its processes' ports."""

    url: str
    command: subprocess.Popen
    log: Path
    ports: tuple[int, ...]
    store_url: str = ""
    """The PostgreSQL URL its processes share (its own schema): what ``audit_class`` reads."""

    def pids(self) -> list[int]:
        """The class's processes as the command last logged them, by port: a process started again (a crash) or a
        rolling restart's successor on the spare port has a new one, and a stopped one is left out."""
        started: dict[int, int] = {}
        for line in self.log.read_text().splitlines():
            if found := re.match(r"memora\.serve: process on 127\.0\.0\.1:(\d+) \(pid (\d+)\)", line):
                started[int(found[1])] = int(found[2])
            elif (found := re.match(r"memora\.serve: the process on port (\d+) \(pid (\d+)\) stopped", line)) and (
                started.get(int(found[1])) == int(found[2])
            ):
                del started[int(found[1])]
        return [started[port] for port in sorted(started)]

    def logged(self, text: str) -> int:
        """How many lines of the command's log hold ``text``."""
        return sum(text in line for line in self.log.read_text().splitlines())


def postgres_schema(url: str) -> str:
    """``url`` with a new schema of its own first on the search path: each setup starts on empty tables."""
    import psycopg

    schema = "classroom_load_" + os.urandom(6).hex()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@contextlib.contextmanager
def served_class(processes: int, env: dict[str, str], ttl_s: int, log: Path) -> Iterator[Served]:
    """``python -m memora.serve --processes N`` on free ports, as a teacher starts a big class; yields it once
    Caddy and every process answer, and stops it as Ctrl-C does (SIGTERM)."""
    first, listen = free_ports(processes + 1), free_port()  # the processes' ports, then the spare a roll starts on
    command = [
        sys.executable,
        "-m",
        "memora.serve",
        "--processes",
        str(processes),
        "--first-port",
        str(first),
        "--listen",
        f"127.0.0.1:{listen}",
    ]
    # The processes' own session TTL, as --ttl gives the servers started here (Streamlit reads it from the environment).
    env = {**env, "STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": str(ttl_s), "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    ports = tuple(range(first, first + processes))
    try:
        for port in ports:
            wait_until_healthy(f"http://127.0.0.1:{port}", process)
        url = f"http://127.0.0.1:{listen}"
        wait_until_healthy(url, process)
        yield Served(url, process, log, ports, env.get("MEMORA_STORE_URL", ""))
    finally:
        process.terminate()
        try:
            process.wait(timeout=SERVE_STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class ProcessSample:
    """CPU-seconds (user + system) and RSS in MiB, summed over the server's processes."""

    cpu_s: float
    rss_mib: float


def sample(pids: Sequence[int]) -> ProcessSample:
    cpu = rss = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15 of stat(5)
        rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE / 2**20
    return ProcessSample(cpu, rss)


# -- one student -------------------------------------------------------------------------


def page_cookies(url: str, cookies: str = "") -> str:
    """GETs the page with ``cookies`` and returns them as one ``Cookie`` header value, updated by those the answer
    sets (behind Caddy, a cookie pinned to a stopped process comes back pinned to a live one)."""
    request = urllib.request.Request(url, headers={"Cookie": cookies} if cookies else {})
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()
        jar = dict(pair.split("=", 1) for pair in cookies.split("; ") if "=" in pair)
        for value in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.split(";", 1)[0].partition("=")
            jar[name] = rest
        return "; ".join(f"{name}={value}" for name, value in jar.items())


@dataclass
class TurnTiming:
    sent_at: float = 0.0
    first_token_s: float | None = None
    done_s: float | None = None
    error: str | None = None


@dataclass
class Student:
    """One browser tab, reduced to the protocol: it reads every ForwardMsg and sends reruns."""

    number: int
    ws_url: str
    offline: bool
    messages: int
    think_s: float
    rng: random.Random
    turns: list[TurnTiming] = field(default_factory=list)
    chat_input_id: str | None = None
    page_script_hash: str = ""
    # The turn boxes drawn with an open state of their own: turn -> (widget id, the fragment that draws it, or "").
    turn_boxes: dict[int, tuple[str, str]] = field(default_factory=dict)
    opened: set[str] = field(default_factory=set)  # widget ids of the boxes this student opened: the browser resends them
    boxes_opened: int = 0
    opens_boxes: bool = True  # False: --closed-boxes, the students of before issue 43, who never open one
    _box_fragment: str | None = None  # the fragment of the box being opened, until a run has drawn it
    _box_drawn: bool = False
    _box_shown: asyncio.Event = field(default_factory=asyncio.Event)
    # The browser's run_every timers: fragment id -> (interval s, the task sending its reruns).
    _timers: dict[str, tuple[float, asyncio.Task]] = field(default_factory=dict)
    fragment_reruns: int = 0  # auto-reruns sent, over the whole session
    page_back_s: list[float] = field(default_factory=list)
    """Per websocket closed by the server mid-class: the time until the page, reconnected, had run again."""
    conversations_back: list[bool] = field(default_factory=list)
    """Per page back after a message had been sent: whether that run drew the conversation again."""
    alerts: list[str] = field(default_factory=list)
    """Every notice the page drew (``st.info``, ``st.warning``...), in order: what she was told."""
    taken: set[str] = field(default_factory=set)
    """The messages (their nonces) the page drew back while their turn ran: the server took them, so none may be lost."""
    # What a browser keeps: the page's cookie (the conversation's owner) and its address's ?c= (which conversation).
    secret: str = field(default_factory=new_browser_secret)
    query_string: str = ""
    session_id: str = ""
    """The session the server last named: a reconnect asks for it back, as the page's frontend does."""
    _sent_any: bool = False
    _redrawn: bool = False
    _ws: Any = None
    _cookies: str = ""
    _closed_at: float | None = None
    _leaving: bool = False
    # Whether the full run in progress drew the chat input enabled.
    _input_enabled: bool = False
    # Per turn:
    _nonce: str | None = None
    _sent_at: float = 0.0
    _user_seen: bool = False
    _timing: TurnTiming | None = None
    _settled: asyncio.Event = field(default_factory=asyncio.Event)
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, start: asyncio.Event, finished: asyncio.Event, ready: list[int]) -> None:
        # The page's URL is the Origin a browser would send; the server checks it against its own host.
        origin = self.ws_url.replace("ws://", "http://").split("/_stcore")[0]
        # The page first, as a browser loads it: behind a sticky load balancer its cookie picks the server for the websocket.
        self._ws = await self._connect(origin)
        reader = asyncio.create_task(self._read(origin))
        try:
            await self._ws.send(self._rerun())
            await asyncio.wait_for(self._idle.wait(), TURN_TIMEOUT_S)
            ready.append(self.number)
            await start.wait()
            for index in range(self.messages):
                await asyncio.sleep(self.think_s * self.rng.uniform(0.5, 1.5))
                await asyncio.wait_for(self._idle.wait(), TURN_TIMEOUT_S)  # a page reconnecting takes no message
                await self._turn(self._ws, index)
                await self._open_newest_box()
            await finished.wait()  # every student stays connected until the last one is done, as a class would
        finally:
            self._leaving = True
            reader.cancel()
            self._cancel_timers(list(self._timers))
            await self._ws.close()

    async def _connect(self, origin: str) -> Any:
        """The page, then its websocket, as a browser loads it: behind a sticky load balancer the page's cookie picks
        the server for the websocket. Retried while nothing answers (a process stopping behind Caddy), up to the
        turn timeout."""
        deadline = time.perf_counter() + TURN_TIMEOUT_S
        while True:
            try:
                self._cookies = await asyncio.to_thread(page_cookies, origin + "/", self._cookies)
                # The frontend names its session on a reconnect (the third subprotocol); a process that stopped took it along.
                named = ["streamlit", "PLACEHOLDER_AUTH_TOKEN", self.session_id] if self.session_id else ["streamlit"]
                return await websockets.connect(
                    self.ws_url,
                    subprotocols=named,
                    max_size=None,
                    origin=origin,
                    ping_interval=None,
                    open_timeout=120,
                    additional_headers={"Cookie": "; ".join(filter(None, (self._cookies, f"{COOKIE}={self.secret}")))},
                )
            except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake):
                if time.perf_counter() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def _turn(self, ws: Any, index: int) -> None:
        self._nonce = f"s{self.number}m{index}"
        self._sent_at = time.perf_counter()
        self._timing = TurnTiming(sent_at=self._sent_at)
        self._user_seen = False
        self._sent_any = True
        self._settled.clear()
        text = f"Message {self._nonce}: how do I ask politely for a late checkout at the hotel?"
        try:
            await ws.send(self._rerun(text))
            await asyncio.wait_for(self._settled.wait(), TURN_TIMEOUT_S)
        except websockets.ConnectionClosed:
            # Closed before the reader saw it: the message never left; the reader reconnects.
            self._timing.error = self._timing.error or "connection closed"
        except TimeoutError:
            self._timing.error = self._timing.error or "timeout"
        self.turns.append(self._timing)
        self._timing = None

    async def _open_newest_box(self) -> None:
        """Opens the newest turn's box, as a curious student does after the reply, and waits for the run that draws
        it: only the fragment that draws the box (the chat's history) where the page has one, else the page. No box
        with an open state of its own (an older page's plain expander, which the browser opens alone), or a page not
        back yet: nothing to send."""
        if not self.opens_boxes or not self.turn_boxes or not self._idle.is_set():
            return
        widget_id, fragment_id = self.turn_boxes[max(self.turn_boxes)]
        if widget_id in self.opened:
            return
        self.opened.add(widget_id)
        self._box_fragment, self._box_drawn = fragment_id, False
        self._box_shown.clear()
        with contextlib.suppress(websockets.ConnectionClosed, TimeoutError):
            await self._ws.send(self._rerun(fragment_id=fragment_id, auto=False))
            await asyncio.wait_for(self._box_shown.wait(), TURN_TIMEOUT_S)
            self.boxes_opened += 1
        self._box_fragment = None

    def _rerun(self, text: str | None = None, fragment_id: str = "", auto: bool = True) -> bytes:
        """A full run (with the chat input's value when ``text`` is given), or a fragment's run: its auto-rerun, or
        (``auto`` False) the run a widget in it asks for. Each carries the open boxes' states, as the browser sends
        every widget's."""
        message = BackMsg()
        client_state = message.rerun_script
        client_state.query_string = self.query_string
        client_state.page_script_hash = self.page_script_hash
        if fragment_id:
            client_state.fragment_id = fragment_id
            client_state.is_auto_rerun = auto
        for widget_id in sorted(self.opened):
            widget = client_state.widget_states.widgets.add()
            widget.id, widget.bool_value = widget_id, True
        if text is not None:
            if self.chat_input_id is None:
                raise RuntimeError("the page drew no chat input")
            widget = client_state.widget_states.widgets.add()
            widget.id = self.chat_input_id
            widget.chat_input_value.data = text
        return message.SerializeToString()

    async def _read(self, origin: str) -> None:
        """Reads every ForwardMsg; when the server closes the websocket (its process stopping), reconnects as
        Streamlit's page does and runs the page again. The turn in flight then fails: its reply is not drawn."""
        while True:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for raw in self._ws:
                    message = ForwardMsg()
                    message.ParseFromString(raw)
                    self._on_message(message, time.perf_counter())
            if self._leaving:
                return
            self._closed_at = time.perf_counter()
            self._redrawn = False
            self._idle.clear()
            self._cancel_timers(list(self._timers))
            if self._timing is not None:
                self._timing.error = self._timing.error or "connection closed"
                self._settled.set()
            self._ws = await self._connect(origin)
            await self._ws.send(self._rerun())

    def _on_message(self, message: ForwardMsg, now: float) -> None:
        kind = message.WhichOneof("type")
        if kind == "new_session":
            self.page_script_hash = message.new_session.page_script_hash
            self.session_id = message.new_session.initialize.session_id or self.session_id
            if not message.metadata.run.fragment_ids:  # a full run: it registers again the fragments it draws
                self._cancel_timers(list(self._timers))
                self._input_enabled = False
        elif kind == "page_info_changed":
            self.query_string = message.page_info_changed.query_string
        elif kind == "auto_rerun":
            self._start_timer(message.auto_rerun.fragment_id, message.auto_rerun.interval)
        elif kind == "stop_auto_rerun":
            self._cancel_timers(message.stop_auto_rerun.fragment_ids)
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            self._note_box_drawn(message.delta)
            self._on_element(message.delta.new_element, now)
        elif kind == "delta" and message.delta.WhichOneof("type") == "add_block":
            self._note_box_drawn(message.delta)
            self._on_block(message.delta)
        elif kind == "script_finished":
            self._on_finished(message.script_finished, now)

    def _start_timer(self, fragment_id: str, interval_s: float) -> None:
        """As the browser does: one timer per fragment; the same interval registered again keeps its countdown."""
        if not fragment_id or interval_s <= 0:
            return  # the frontend ignores these too
        current = self._timers.get(fragment_id)
        if current is not None and current[0] == interval_s:
            return
        self._cancel_timers([fragment_id])
        self._timers[fragment_id] = (interval_s, asyncio.get_running_loop().create_task(self._tick(fragment_id, interval_s)))

    async def _tick(self, fragment_id: str, interval_s: float) -> None:
        # setInterval: a request every interval, whether or not the last one's run has finished (the server coalesces).
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                await asyncio.sleep(interval_s)
                await self._ws.send(self._rerun(fragment_id=fragment_id))
                self.fragment_reruns += 1

    def _cancel_timers(self, fragment_ids: Sequence[str]) -> None:
        for fragment_id in fragment_ids:
            timer = self._timers.pop(fragment_id, None)
            if timer is not None:
                timer[1].cancel()

    def _on_element(self, element: Any, now: float) -> None:
        which = element.WhichOneof("type")
        if which == "chat_input":
            self.chat_input_id = element.chat_input.id
            self._input_enabled = not element.chat_input.disabled
            return
        if which not in ("markdown", "text", "alert", "exception"):
            return
        body = getattr(element, which).body if which != "exception" else element.exception.message
        if which == "alert":
            self.alerts.append(body)
        if self._closed_at is not None and f"Message s{self.number}m" in body:
            self._redrawn = True  # the page back drew a message this student sent before the close
        timing = self._timing
        if timing is None:
            return
        if which == "exception":
            timing.error = timing.error or f"exception: {body[:80]}"
            return
        nonce = self._nonce or ""
        if nonce and nonce in body:
            self.taken.add(nonce)
        if self.offline:
            if nonce in body:
                self._user_seen = True
            elif self._user_seen and timing.first_token_s is None and OFFLINE_OPENING in body:
                timing.first_token_s = now - self._sent_at
        else:
            if timing.first_token_s is None and f"Answer to {nonce}" in body:
                timing.first_token_s = now - self._sent_at
            if timing.done_s is None and f"(end {nonce})" in body:
                timing.done_s = now - self._sent_at
        if which == "alert" and element.alert.format in (1, 2):  # ERROR, WARNING: a refused or failed turn
            timing.error = timing.error or f"alert: {body[:80]}"

    def _on_block(self, delta: Any) -> None:
        """Notes a turn box drawn with an open state of its own: its widget id and the fragment that draws it."""
        block = delta.add_block
        if block.WhichOneof("type") != "expandable" or not block.id:
            return
        found = TURN_BOX.fullmatch(block.expandable.label)
        if found:
            self.turn_boxes[int(found.group(1))] = (block.id, delta.fragment_id)

    def _note_box_drawn(self, delta: Any) -> None:
        if self._box_fragment is not None and delta.fragment_id == self._box_fragment:
            self._box_drawn = True

    def _on_finished(self, status: int, now: float) -> None:
        if self._box_fragment is not None and self._box_drawn and status in RUN_FINISHED:
            self._box_shown.set()
        if status != ForwardMsg.FINISHED_SUCCESSFULLY:
            return  # a fragment run, or a run cut short for the next: the page is not settled by it
        if self._closed_at is not None:
            self.page_back_s.append(now - self._closed_at)
            if self._sent_any:
                self.conversations_back.append(self._redrawn)
            self._closed_at = None
        self._idle.set()
        timing = self._timing
        if timing is None or not self._input_enabled:
            return
        if self.offline and timing.first_token_s is not None and timing.done_s is None:
            timing.done_s = now - self._sent_at  # the explanation is committed and the page takes the next message
        # A full run that ends with the input enabled after the reply is whole leaves the page ready for the next message.
        if timing.done_s is not None or timing.error is not None:
            self._settled.set()


# -- one run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadResult:
    label: str
    students: int
    turns: int
    failed: int
    first_token: list[float]
    done: list[float]
    wall_s: float
    page_cpu_s: float
    turn_cpu_s: float
    rss_idle: float
    rss_warm: float
    rss_loaded: float
    rss_closed: float
    rss_second_loaded: float
    rss_second_closed: float
    client_cpu_s: float
    fragment_reruns_per_turn: float
    boxes_opened_per_turn: float
    errors: tuple[str, ...]


async def wave(
    ws_url: str, students: int, args: argparse.Namespace, pids: Sequence[int], seed: int, on_start: Any = None
) -> tuple[list[Student], dict]:
    """Connects ``students`` students, lets them talk, closes them; returns them and the server samples.
    ``on_start``: called as the message phase begins (once every student's page has run)."""
    start, finished = asyncio.Event(), asyncio.Event()
    ready: list[int] = []
    rng = random.Random(seed)
    crowd = [Student(n, ws_url, args.offline, args.messages, args.think, random.Random(rng.random())) for n in range(1, students + 1)]
    for student in crowd:
        student.opens_boxes = not getattr(args, "closed_boxes", False)
    before_pages = sample(pids)
    tasks = [asyncio.create_task(s.run(start, finished, ready)) for s in crowd]
    while len(ready) < students:
        if any(t.done() for t in tasks):
            for task in tasks:
                if task.done() and task.exception():
                    raise task.exception()
        await asyncio.sleep(0.05)
    samples = {"before_pages": before_pages, "before_turns": sample(pids)}
    began = time.perf_counter()
    if on_start is not None:
        on_start()
    start.set()
    while sum(len(s.turns) for s in crowd) < students * args.messages:
        await asyncio.sleep(0.05)
        for task in tasks:
            if task.done() and task.exception():
                raise task.exception()
    samples["wall_s"] = time.perf_counter() - began
    samples["after_turns"] = sample(pids)
    finished.set()
    await asyncio.gather(*tasks)
    return crowd, samples


def measure(label: str, http_url: str, pids: Sequence[int], students: int, args: argparse.Namespace) -> LoadResult:
    ws_url = http_url.replace("http://", "ws://") + "/_stcore/stream"
    client_before = time.process_time()
    idle = sample(pids)
    # Imports and caches are paid once per process. Behind a balancer a student lands on any process,
    # so several warm up: with 4 per process, each of 2 processes is missed by all 8 once in 128 runs.
    # One after the other: concurrent first runs grow the heap more than a class does (a run of 8 at
    # once left 2 processes at 400 MiB each, which fell back to 345 MiB under 80 students).
    for warm_up in range(1 if len(pids) == 1 else 4 * len(pids)):
        asyncio.run(wave(ws_url, 1, _one_message(args), pids, seed=warm_up))
    warm = sample(pids)
    crowd, samples = asyncio.run(wave(ws_url, students, args, pids, seed=1))
    loaded = samples["after_turns"]
    closed = sweep(ws_url, pids, args)
    _, second = asyncio.run(wave(ws_url, students, args, pids, seed=2))
    second_closed = sweep(ws_url, pids, args)
    turns = [t for s in crowd for t in s.turns]
    ok = [t for t in turns if t.error is None and t.first_token_s is not None and t.done_s is not None]
    return LoadResult(
        label=label,
        students=students,
        turns=len(turns),
        failed=len(turns) - len(ok),
        first_token=[t.first_token_s for t in ok],  # type: ignore[misc]
        done=[t.done_s for t in ok],  # type: ignore[misc]
        wall_s=samples["wall_s"],
        page_cpu_s=(samples["before_turns"].cpu_s - samples["before_pages"].cpu_s) / students,
        turn_cpu_s=(loaded.cpu_s - samples["before_turns"].cpu_s) / max(len(turns), 1),
        rss_idle=idle.rss_mib,
        rss_warm=warm.rss_mib,
        rss_loaded=loaded.rss_mib,
        rss_closed=closed.rss_mib,
        rss_second_loaded=second["after_turns"].rss_mib,
        rss_second_closed=second_closed.rss_mib,
        client_cpu_s=time.process_time() - client_before,
        fragment_reruns_per_turn=sum(s.fragment_reruns for s in crowd) / max(len(turns), 1),
        boxes_opened_per_turn=sum(s.boxes_opened for s in crowd) / max(len(turns), 1),
        errors=tuple(sorted({t.error for t in turns if t.error})),
    )


@dataclass(frozen=True)
class RestartResult:
    """One wave through a rolling restart: first tokens of turns sent before it, during it (from the first stop
    until the last process restarted answers its health check) and after; the pages back; the turns cut."""

    label: str
    students: int
    turns: int
    failed: int
    before: list[float]
    during: list[float]
    after: list[float]
    page_back: list[float]
    conversations_back: list[bool]
    window_s: float
    errors: tuple[str, ...]
    audit: ClassAudit | None = None
    postgres: PostgresRestart | None = None
    """The PostgreSQL restart in this wave (``--restart-postgres``); None without one."""


@dataclass(frozen=True)
class ClassAudit:
    """What the class's students find in PostgreSQL after a wave (issue 44, finding 1): ``forks``, the conversations
    per student beyond one (``forked``: the students with more than one); ``billed``, the reply requests the server
    budget settled (None without ``MEMORA_MAX_SERVER_TOKENS``); ``kept``, the replies in the conversation each student
    continues (the one her page's ``?c=`` names last); ``typed``, the messages the page drew back while their turn ran
    (the server took them), and ``lost``, those neither in that conversation nor kept there as its pending message."""

    students: int
    forks: int
    forked: int
    billed: int | None
    kept: int
    typed: int
    lost: int


def billed_replies(store_url: str) -> int | None:
    """The reply requests the server budget at ``store_url`` has settled so far; None when it keeps no ledger."""
    import psycopg

    with psycopg.connect(store_url) as db:
        if db.execute("SELECT to_regclass('memora_server_requests')").fetchone()[0] is None:
            return None
        return int(db.execute("SELECT COUNT(*) FROM memora_server_requests WHERE kind = 'reply' AND settled").fetchone()[0])


def audit_class(store_url: str, crowd: Sequence[Student], billed_before: int | None = None) -> ClassAudit:
    """Counts ``ClassAudit``'s figures for ``crowd`` in the database at ``store_url`` (the class's own schema);
    ``billed_before``: the replies billed before ``crowd`` came (``billed_replies``: a warm-up's), left out."""
    import psycopg

    from memora.classroom.store.owner import owner_of
    from memora.classroom.store.saved import parse_saved

    with psycopg.connect(store_url) as db:
        rows = db.execute("SELECT owner, id, payload FROM memora_conversations").fetchall()
    billed = billed_replies(store_url)
    if billed is not None:
        billed -= billed_before or 0
    forks = forked = kept = typed = lost = 0
    for student in crowd:
        owned = {conversation_id: payload for owner, conversation_id, payload in rows if owner == owner_of(student.secret)}
        forks += max(len(owned) - 1, 0)
        forked += len(owned) > 1
        continued = parse_qs(student.query_string).get("c", [""])[0]
        saved = parse_saved(owned[continued]) if continued in owned else None
        said = [] if saved is None else [m.content for m in saved.transcript.history if m.role == "user"]
        if saved is not None and saved.pending_message is not None:
            said.append(saved.pending_message)
        kept += 0 if saved is None else sum(record.kind == "reply" for record in saved.transcript.ledger)
        typed += len(student.taken)
        lost += sum(not any(f"Message {nonce}:" in text for text in said) for nonce in student.taken)
    return ClassAudit(len(crowd), forks, forked, billed, kept, typed, lost)


@dataclass(frozen=True)
class PostgresRestart:
    """A restart of the class's PostgreSQL cluster during a roll: ``at_s``, when it began, in seconds from the roll's
    start; ``took_s``, until ``pg_ctlcluster`` returned (it waits for the server to accept connections again);
    ``error``, its output when it failed (the wave then went on with PostgreSQL in whatever state it left)."""

    at_s: float
    took_s: float
    error: str = ""


def postgres_cluster(text: str) -> tuple[str, str]:
    """``--restart-postgres``'s VERSION/NAME (``15/roll``, as ``pg_lsclusters`` names a cluster) as a pair; raises
    ``argparse.ArgumentTypeError`` for anything else, so that no other text reaches ``pg_ctlcluster``'s command line."""
    version, _, name = text.partition("/")
    if not re.fullmatch(r"\d+(\.\d+)?", version) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise argparse.ArgumentTypeError(f"wants VERSION/NAME, as pg_lsclusters lists a cluster (15/roll), not {text!r}")
    return version, name


def cluster_port(cluster: tuple[str, str]) -> int | None:
    """The port ``pg_lsclusters`` gives ``cluster``; None when it lists no such cluster."""
    listed = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True).stdout
    for line in listed.splitlines():
        version, name, port, *_ = line.split()
        if (version, name) == cluster:
            return int(port)
    return None


def check_cluster(cluster: tuple[str, str], store_url: str) -> str:
    """Why ``cluster`` must not be restarted for a class on ``store_url``, or "" when it may: it must exist and listen
    on the URL's port (default 5432). A host other than this machine's is refused too, since only a local cluster can
    be restarted here; the URL's password is never quoted."""
    from urllib.parse import urlsplit

    where = urlsplit(store_url)
    if where.hostname not in ("127.0.0.1", "localhost", "::1"):
        return "--restart-postgres restarts a cluster on this machine: MEMORA_STORE_URL must name 127.0.0.1 or localhost"
    port = cluster_port(cluster)
    if port is None:
        return f"--restart-postgres: pg_lsclusters lists no cluster {'/'.join(cluster)}"
    if port != (where.port or 5432):
        return f"--restart-postgres: cluster {'/'.join(cluster)} listens on {port}, MEMORA_STORE_URL on {where.port or 5432}"
    return ""


def restart_postgres(cluster: tuple[str, str], since: float) -> PostgresRestart:
    """``pg_ctlcluster VERSION NAME restart`` (fast shutdown: every connection is cut, open transactions roll back),
    timed from ``since`` (the roll's start, ``time.perf_counter``)."""
    began = time.perf_counter()
    done = subprocess.run(["pg_ctlcluster", *cluster, "restart"], capture_output=True, text=True)
    error = "" if done.returncode == 0 else (done.stdout + done.stderr).strip() or f"exit {done.returncode}"
    return PostgresRestart(at_s=began - since, took_s=time.perf_counter() - began, error=error)


ROLL_SERVER_TOKENS = 10**9
"""The server budget a ``--rolling-restart`` class runs under: far above what it spends, so that it refuses nothing
and its ledger records every billed request."""


def wait_for_log(served: Served, text: str, count: int) -> None:
    """Until the command's log holds ``text`` ``count`` times: a bound on a hang, not a measure."""
    deadline = time.monotonic() + 120
    while served.logged(text) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"memora.serve did not log {text!r} within 120 s")
        time.sleep(0.1)


def stop_one(served: Served) -> None:
    """SIGTERM to one process, as a crash or a stop by hand leaves it; ``memora.serve`` starts it again on its port
    and runs its page once."""
    ran = served.logged("ran the page")
    os.kill(served.pids()[0], signal.SIGTERM)
    wait_for_log(served, "ran the page", ran + 1)


def stop_in_turn(served: Served) -> None:
    """Each process stopped in turn (SIGTERM), the next as soon as the last, started again, answers its health
    check: a rolling restart by hand, without the command's help."""
    for port, pid in zip(sorted(served.ports), served.pids(), strict=True):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 120
        while pid in served.pids() and time.monotonic() < deadline:
            time.sleep(0.1)  # the command logs the new process once the old one has exited
        wait_until_healthy(f"http://127.0.0.1:{port}")


def hang_up(served: Served) -> None:
    """``kill -HUP`` to the command: its rolling restart, each successor started on the spare port and its page run
    once before the old process stops."""
    done = served.logged("rolling restart done")
    served.command.send_signal(signal.SIGHUP)
    wait_for_log(served, "rolling restart done", done + 1)


FAILOVERS = {
    "one process stopped (SIGTERM)": stop_one,
    "each stopped in turn, by hand": stop_in_turn,
    "kill -HUP memora.serve": hang_up,
}
"""The ways a class's processes go away mid-lesson, each measured in a wave of its own (``--rolling-restart``)."""


def failover(
    served: Served,
    how: Callable[[Served], None],
    after_s: float,
    window: list[float],
    postgres: tuple[tuple[str, str], float] | None = None,
    restarted: list[PostgresRestart] | None = None,
) -> None:
    """From ``after_s`` seconds on, ``how``; ``window`` gets the clock times of its start and its end. With
    ``postgres`` (a cluster and a delay), that cluster is also restarted the delay after the roll's first stop, on a
    thread of its own so that the roll goes on meanwhile, and ``restarted`` gets what happened; a roll that ends before
    the delay still waits for it, so every wave has its restart."""
    time.sleep(after_s)
    window.append(time.perf_counter())
    restarter = None
    if postgres is not None:
        ran = served.logged("ran the page")

        def restart_mid_roll() -> None:
            if how is hang_up:  # the command stops its first old process as soon as the successor has run its page
                wait_for_log(served, "ran the page", ran + 1)
            time.sleep(postgres[1])  # SIGTERM and by hand stop a process at the roll's start
            restarted.append(restart_postgres(postgres[0], window[0]))  # type: ignore[union-attr]

        restarter = threading.Thread(target=restart_mid_roll, daemon=True)
        restarter.start()
    how(served)
    if restarter is not None:
        restarter.join()
    window.append(time.perf_counter())


def measure_restart(label: str, served: Served, how: Callable[[Served], None], students: int, args: argparse.Namespace) -> RestartResult:
    """One wave of ``students`` while ``how`` takes processes of ``served`` away (one of ``FAILOVERS``)."""
    ws_url = served.url.replace("http://", "ws://") + "/_stcore/stream"
    for warm_up in range(4 * len(served.ports)):
        asyncio.run(wave(ws_url, 1, _one_message(args), [], seed=warm_up))
    billed_before = billed_replies(served.store_url) if served.store_url else None  # the warm-up's, not the class's
    window: list[float] = []
    restarted: list[PostgresRestart] = []
    postgres = None if args.restart_postgres is None else (args.restart_postgres, args.restart_postgres_after)
    restarter = threading.Thread(target=failover, args=(served, how, args.rolling_restart, window, postgres, restarted), daemon=True)
    # The restart's clock starts with the message phase, once every student's page has run, as the wave's own does.
    crowd, _ = asyncio.run(wave(ws_url, students, args, [], seed=1, on_start=restarter.start))
    restarter.join()
    turns = [t for s in crowd for t in s.turns]
    ok = [t for t in turns if t.error is None and t.first_token_s is not None and t.done_s is not None]
    start, end = (window[0], window[-1]) if len(window) >= 2 else (float("inf"), float("inf"))
    return RestartResult(
        label=label,
        students=students,
        turns=len(turns),
        failed=len(turns) - len(ok),
        before=[t.first_token_s for t in ok if t.sent_at < start],  # type: ignore[misc]
        during=[t.first_token_s for t in ok if start <= t.sent_at <= end],  # type: ignore[misc]
        after=[t.first_token_s for t in ok if t.sent_at > end],  # type: ignore[misc]
        page_back=[back for s in crowd for back in s.page_back_s],
        conversations_back=[back for s in crowd for back in s.conversations_back],
        window_s=end - start,
        errors=tuple(sorted({t.error for t in turns if t.error})),
        audit=audit_class(served.store_url, crowd, billed_before) if served.store_url else None,
        postgres=restarted[0] if restarted else None,
    )


def restart_report(results: Sequence[RestartResult]) -> str:
    lines = [
        "",
        'Failover ("during": from the first stop until the last process is back and has run its page):',
        "",
        "| setup | students | turns (failed) | window s | first token p95 s before / during / after (turns) "
        "| pages back | page back median / max s | conversations back | forks (students) | billed replies kept "
        "| typed messages lost |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        back = f"{median(r.page_back):.2f} / {max(r.page_back):.2f}" if r.page_back else "-"
        audit = r.audit
        forks = "-" if audit is None else f"{audit.forks} ({audit.forked})"
        kept = "-" if audit is None else f"{audit.kept} of {'-' if audit.billed is None else audit.billed}"
        lost = "-" if audit is None else f"{audit.lost} of {audit.typed}"
        lines.append(
            f"| {r.label} | {r.students} | {r.turns} ({r.failed}) | {r.window_s:.1f} "
            f"| {p95(r.before):.2f} ({len(r.before)}) / {p95(r.during):.2f} ({len(r.during)}) / {p95(r.after):.2f} "
            f"({len(r.after)}) | {len(r.page_back)} | {back} | {sum(r.conversations_back)} of {len(r.conversations_back)} "
            f"| {forks} | {kept} | {lost} |"
        )
    errors = sorted({e for r in results for e in r.errors})
    if errors:
        lines += ["", "Failed turns: " + "; ".join(errors)]
    for r in results:
        if r.postgres is not None:
            outcome = f"failed: {r.postgres.error}" if r.postgres.error else f"back in {r.postgres.took_s:.2f} s"
            lines.append(f'PostgreSQL restarted in "{r.label}": {r.postgres.at_s:.2f} s into the roll, {outcome}')
    return "\n".join(lines)


def sweep(ws_url: str, pids: Sequence[int], args: argparse.Namespace) -> ProcessSample:
    """The server's sample once the closed sessions are gone.

    Streamlit keeps a closed session for reconnection, in a TTL cache that drops
    expired entries only when the next session is stored; so this waits past the
    TTL, then one student comes and goes, and its departure drops the others.
    """
    time.sleep(args.ttl + 2)
    asyncio.run(wave(ws_url, 1, _one_message(args), pids, seed=3))
    return sample(pids)


def _one_message(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "messages": 1, "think": 0.0})


def app_env(model_url: str | None, data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    env["MEMORA_DATA_DIR"] = data_dir
    if model_url is None:
        env["MEMORA_BACKEND"] = "offline"
    else:
        env.update(MEMORA_BACKEND="chat", MEMORA_BASE_URL=model_url, MEMORA_MODEL="paced", MEMORA_MAX_RETRIES="0")
    return env


# -- the report --------------------------------------------------------------------------


def p95(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else (values[0] if values else float("nan"))


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: Sequence[LoadResult], args: argparse.Namespace) -> str:
    if args.offline:
        mode = (
            "offline engine, no model: 'first token' = the first delta of the offline explanation after the user's message, "
            "'done' = the end of the run that drew it; both are server time only"
        )
    else:
        total = args.latency + args.reply_tokens / args.rate
        mode = (
            f"paced fake model: first token after {args.latency:g} s, then {args.rate:g} tokens/s, "
            f"{args.reply_tokens} tokens (a whole reply takes {total:.1f} s at the model)"
        )
    lines = [
        f"{args.messages} messages per student, think time {args.think * 0.5:g}-{args.think * 1.5:g} s; {mode}",
        "",
        "| app | students | turns (failed) | first token median / p95 s | done median / p95 s | CPU-s per turn | CPU-s per page open "
        "| RSS MiB idle / warm / loaded / closed / 2nd wave loaded / closed | MiB per session | fragment reruns per turn "
        "| turn boxes opened on the server per turn | wall s |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        per_session = (r.rss_loaded - r.rss_warm) / r.students
        lines.append(
            f"| {r.label} | {r.students} | {r.turns} ({r.failed}) | {median(r.first_token):.2f} / {p95(r.first_token):.2f} "
            f"| {median(r.done):.2f} / {p95(r.done):.2f} | {r.turn_cpu_s:.3f} | {r.page_cpu_s:.3f} "
            f"| {r.rss_idle:.0f} / {r.rss_warm:.0f} / {r.rss_loaded:.0f} / {r.rss_closed:.0f} "
            f"/ {r.rss_second_loaded:.0f} / {r.rss_second_closed:.0f} "
            f"| {per_session:.2f} | {r.fragment_reruns_per_turn:.1f} | {r.boxes_opened_per_turn:.2f} | {r.wall_s:.0f} |"
        )
    labels = list(dict.fromkeys(r.label for r in results))
    if len(labels) > 1:
        lines += ["", f"Ratios to {labels[0]} (same students):", ""]
        base = {r.students: r for r in results if r.label == labels[0]}
        for r in results:
            b = base.get(r.students)
            if r.label == labels[0] or b is None:
                continue
            lines.append(
                f"- {r.label}, {r.students} students: first token p95 {p95(r.first_token) / p95(b.first_token):.2f}x, "
                f"done p95 {p95(r.done) / p95(b.done):.2f}x, CPU-s per turn {r.turn_cpu_s / b.turn_cpu_s:.2f}x, "
                f"CPU-s per page open {r.page_cpu_s / b.page_cpu_s:.2f}x"
            )
    errors = sorted({e for r in results for e in r.errors})
    if errors:
        lines += ["", "Errors seen: " + "; ".join(errors)]
    lines += ["", "Client CPU-s (this process): " + ", ".join(f"{r.label}/{r.students}: {r.client_cpu_s:.0f}" for r in results)]
    return "\n".join(lines)


def parse_target(text: str, parser: argparse.ArgumentParser) -> tuple[str, str, list[int]]:
    """``"2 via caddy=http://127.0.0.1:8080=111,222"`` as (label, URL, process ids)."""
    try:
        label, url, pids = text.split("=")
        return label, url.rstrip("/"), [int(pid) for pid in pids.split(",")]
    except ValueError:
        parser.error(f"--target wants LABEL=URL=PID[,PID...], not {text!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[40])
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--think", type=float, default=5.0, help="mean think time before each message, s (uniform 0.5-1.5x)")
    parser.add_argument("--latency", type=float, default=1.0, help="the model's time to first token, s")
    parser.add_argument("--rate", type=float, default=20.0, help="the model's tokens per second after the first")
    parser.add_argument("--reply-tokens", type=int, default=22)
    parser.add_argument("--offline", action="store_true", help="no model: the page's offline engine")
    parser.add_argument(
        "--closed-boxes", action="store_true", help="students never open a turn box (what the page costs those who do not look)"
    )
    parser.add_argument("--apps", nargs="+", type=Path, default=[ROOT], help="checkouts to compare, each run in turn")
    parser.add_argument("--ttl", type=int, default=2, help="server.disconnectedSessionTTL for the servers started here, s")
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="LABEL=URL=PID[,PID...]",
        help="an already running setup (a load balancer, say) and its server processes to sample; repeatable, replaces --apps",
    )
    parser.add_argument("--model-port", type=int, default=0, help="the fake model's port (0: any free one); fix it for --target setups")
    parser.add_argument(
        "--serve",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="run `python -m memora.serve --processes N` (Caddy, the shipped Caddyfile) on MEMORA_STORE_URL's PostgreSQL, "
        "for each N in turn; replaces --apps",
    )
    parser.add_argument(
        "--rolling-restart",
        type=float,
        default=None,
        metavar="S",
        help="with --serve: one wave in which each process is stopped in turn, from S s into the message phase",
    )
    parser.add_argument(
        "--restart-postgres",
        type=postgres_cluster,
        default=None,
        metavar="VERSION/NAME",
        help="with --rolling-restart: restart this PostgreSQL cluster (pg_ctlcluster; the one MEMORA_STORE_URL names, "
        "and one of its own: every connection to it drops) in each wave, mid-roll",
    )
    parser.add_argument(
        "--restart-postgres-after",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds after the roll's first stop (with kill -HUP: once the first successor has run its page) "
        "that --restart-postgres restarts the cluster (default 1)",
    )
    args = parser.parse_args()
    targets = [parse_target(text, parser) for text in args.target]
    store_url = os.environ.get("MEMORA_STORE_URL", "").strip()
    if args.serve and not store_url.startswith(("postgresql://", "postgres://")):
        parser.error("--serve needs MEMORA_STORE_URL=postgresql://..., the database every process shares")
    if args.rolling_restart is not None and not args.serve:
        parser.error("--rolling-restart needs --serve")
    if args.restart_postgres is not None and args.rolling_restart is None:
        parser.error("--restart-postgres needs --rolling-restart")
    if args.restart_postgres is not None and (refused := check_cluster(args.restart_postgres, store_url)):
        parser.error(refused)
    if args.serve:
        serve(args, store_url)
        return
    results = []
    with contextlib.ExitStack() as stack:
        model_url = None if args.offline else stack.enter_context(model_server(args.latency, args.rate, args.reply_tokens, args.model_port))
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="memora-load-"))
        log = Path(data_dir) / "streamlit.log"
        for students in args.students:
            for label, url, pids in targets:
                wait_until_healthy(url)
                results.append(measure(label, url, pids, students, args))
                print(report(results, args), file=sys.stderr)
            for app in [] if targets else args.apps:
                with streamlit_server(app.resolve(), app_env(model_url, data_dir), args.ttl, log) as (url, pid):
                    label = str(app) if len(args.apps) > 1 else "this checkout"
                    results.append(measure(label, url, [pid], students, args))
                print(report(results, args), file=sys.stderr)
    print(report(results, args))


def serve(args: argparse.Namespace, store_url: str) -> None:
    """The ``--serve`` runs: each process count in turn, on one model, each class on a schema of its own; with
    ``--rolling-restart``, one class for each of ``FAILOVERS`` instead of the usual waves."""
    results: list[LoadResult] = []
    restarts: list[RestartResult] = []
    with contextlib.ExitStack() as stack:
        model_url = None if args.offline else stack.enter_context(model_server(args.latency, args.rate, args.reply_tokens, args.model_port))
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="memora-load-"))

        def started(processes: int, name: str) -> contextlib.AbstractContextManager[Served]:
            env = {**app_env(model_url, data_dir), "MEMORA_STORE_URL": postgres_schema(store_url)}
            if args.rolling_restart is not None:  # the server budget's ledger: what was billed, for ``audit_class``
                env["MEMORA_MAX_SERVER_TOKENS"] = str(ROLL_SERVER_TOKENS)
            return served_class(processes, env, args.ttl, Path(data_dir) / f"serve-{processes}-{name}.log")

        for students in args.students:
            for processes in args.serve:
                label = f"{processes} process{'es' if processes > 1 else ''} behind Caddy"
                if args.rolling_restart is None:
                    with started(processes, "load") as served:
                        results.append(measure(label, served.url, served.pids(), students, args))
                for name, how in FAILOVERS.items() if args.rolling_restart is not None else ():
                    with started(processes, how.__name__) as served:
                        restarts.append(measure_restart(f"{label}, {name}", served, how, students, args))
                print(serve_report(results, restarts, args), file=sys.stderr)
    print(serve_report(results, restarts, args))


def serve_report(results: Sequence[LoadResult], restarts: Sequence[RestartResult], args: argparse.Namespace) -> str:
    return (report(results, args) if results else "") + (restart_report(restarts) if restarts else "")


if __name__ == "__main__":
    main()
