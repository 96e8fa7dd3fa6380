"""What each panel of the page costs the server on a conversation at the size cap: CPU-seconds and bytes a run.

Run from the repository root::

    python benchmarks/page_rerun.py                          # this checkout
    python benchmarks/page_rerun.py --apps /tmp/memora-main .  # two checkouts, side by side in one run
    python benchmarks/page_rerun.py --turns 10 40 --apps /tmp/memora-main .  # the chat's turn boxes, by length

One conversation is built through the memory's own turns (a scripted model that answers in one short
sentence and summarizes in a few words, so that it is the turns that fill the conversation) until its
saved size reaches ``MEMORA_MAX_CONVERSATION_KB`` (1 MiB by default; ``--kb``): about 2,000 turns.
It is saved in a SQLite store under a browser's secret, and each checkout's ``streamlit run``
(offline backend, default settings) opens it as that browser would: the cookie, and ``?c=<id>``.
A client speaks Streamlit's own websocket protocol, as the browser does, including the browser's cache
of large messages (it sends the hashes of those it holds, and the server sends references to them).

Measured per panel, on the server (``/proc/PID``: user + system CPU-seconds) and on the wire (bytes of
the websocket messages the run sent):

- *page opens*: a new tab's first run in a process that has served a page already (its imports and caches
  warm): the conversation is read from the store and drawn;
- *page, panels closed*: a rerun with every panel as it first appears (the chat shows its newest messages);
- for each panel that draws only when opened (*Earlier messages* in the chat, *Full history*, *Token usage*,
  *What if*), in a tab of its own (a new session of the same browser): the run that opens it, then the median
  of ``--repeats`` reruns while it is open (a rerun is
  what any click elsewhere on the page costs while the panel stays open), and, where the panel pages
  through its content, the run that turns to its next page.

``--turns N [N ...]``: instead, a conversation of N turns each (the same model), and what a run costs (the mean of
``--repeats``, in CPU-milliseconds) as the conversation grows: a rerun with every turn box collapsed, the run that
opens the newest turn's box (a run of the fragment that draws the box, the chat's history, where the page draws it
in one; a full run where it does not), and a rerun while that box is open. A checkout whose boxes have no open
state of their own (a plain ``st.expander``, before issue 43) draws every box's body on every run, and the browser
opens one without asking the server: its opening shows "-".

Figures depend on the machine and what else runs on it; compare the checkouts' columns of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from benchmarks.classroom_load import app_env, sample, streamlit_server  # noqa: E402
from memora.classroom.store import open_store  # noqa: E402
from memora.classroom.store.base import new_conversation_id  # noqa: E402
from memora.classroom.store.owner import new_browser_secret, owner_of  # noqa: E402
from memora.classroom.store.saved import dumps_saved  # noqa: E402
from memora.memory import ShortTermMemory  # noqa: E402
from memora.memory.backend import OPENAI_PROFILE, Completion, ReplyRequest, SummaryRequest  # noqa: E402
from memora.text.tokens import count_text  # noqa: E402
from memora.text.usage import Usage  # noqa: E402

COOKIE = "memora_browser"
RUN_TIMEOUT_S = 600.0
LAZY_PANELS = ("Earlier messages", "Full history", "Token usage", "What if")
"""The English labels (their start) of the expanders that draw only while open."""
NEXT_PAGE = "Older"
"""The label of a paged panel's button to its next (older) page, where the checkout has one."""


# -- the conversation --------------------------------------------------------------------


class ShortModel:
    """A model that answers each message in one short sentence and keeps a summary of a few words: a long
    conversation of many short turns, the kind that reaches the size cap with the most turns."""

    label = "short replies"
    offline = False
    profile = OPENAI_PROFILE

    def count_request(self, model: str, instructions: str, messages: object) -> None:
        return None  # no tokenizer of its own: the memory counts with o200k_base

    def counting_source(self, model: str) -> None:
        return None

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        number = sum(m.role == "user" for m in request.messages)
        text = f"Try: 'Could I check out a little later, please?' ({number})"
        yield text
        yield Completion(text, Usage(count_text(" ".join(m.content for m in request.messages)), count_text(text)))

    def summarize(self, request: SummaryRequest) -> Completion:
        text = "The learner (B1) practises polite requests at a hotel."
        return Completion(text, Usage(count_text(request.input_text), count_text(text)))


def capped_conversation(cap_bytes: int, step: int = 50) -> tuple[ShortTermMemory, int]:
    """A conversation grown turn by turn to the largest whose saved payload fits ``cap_bytes``; with its size."""
    memory = ShortTermMemory(ShortModel())
    payload = dumps_saved(memory, "en")
    while True:
        grown = copy.deepcopy(memory)  # the ledger is mutable: a step that overshoots must leave ``memory`` as it was
        for _ in range(step):
            number = len(grown.history) // 2 + 1
            with grown.turn(f"Message {number}: how do I ask politely for a late checkout at the hotel?") as turn:
                turn.run()
            grown.prefold()
        bigger = dumps_saved(grown, "en")
        if len(bigger.encode()) > cap_bytes:
            if step == 1:
                return memory, len(payload.encode())
            step = max(1, step // 5)
            continue
        memory, payload = grown, bigger


def saved_store(memory: ShortTermMemory, data_dir: Path) -> tuple[str, str]:
    """``memory`` saved in ``data_dir``'s default SQLite store under a new browser; its secret and conversation id."""
    secret, conversation_id = new_browser_secret(), new_conversation_id()
    store = open_store(f"sqlite:///{data_dir / 'conversations.sqlite3'}")
    assert store is not None
    store.save(conversation_id, dumps_saved(memory, "en"), 0, owner_of(secret))
    store.close()
    return secret, conversation_id


# -- one browser tab ---------------------------------------------------------------------


@dataclass(frozen=True)
class RunCost:
    cpu_s: float
    sent_bytes: int


@dataclass
class Tab:
    """One browser tab reduced to the protocol: it sends runs with its widgets' states and reads what comes back."""

    url: str
    secret: str
    conversation_id: str
    pids: Sequence[int]
    expanders: dict[str, str] = field(default_factory=dict)  # label -> widget id, from the last run
    fragments: dict[str, str] = field(default_factory=dict)  # label -> the fragment that draws it ("" for none)
    markdown: list[str] = field(default_factory=list)  # the Markdown bodies the last full run drew
    buttons: dict[str, str] = field(default_factory=dict)
    opened: dict[str, bool] = field(default_factory=dict)  # widget id -> open, as the browser would send it
    cached: set[str] = field(default_factory=set)  # hashes of the large messages the browser keeps
    page_script_hash: str = ""
    _ws: object = None

    @contextlib.contextmanager
    def open(self) -> Iterator[Tab]:
        origin = self.url
        ws_url = self.url.replace("http://", "ws://") + "/_stcore/stream"
        with connect(
            ws_url,
            subprotocols=["streamlit"],
            origin=origin,
            max_size=None,
            open_timeout=120,
            additional_headers={"Cookie": f"{COOKIE}={self.secret}"},
        ) as ws:
            self._ws = ws
            yield self

    def run(self, click: str | None = None, fragment_id: str = "") -> RunCost:
        """One full run of the page, or of the fragment ``fragment_id`` (``click``: the id of a button pressed in
        it); what it cost the server."""
        message = BackMsg()
        client = message.rerun_script
        client.query_string = f"c={self.conversation_id}"
        client.page_script_hash = self.page_script_hash
        client.fragment_id = fragment_id
        client.cached_message_hashes.extend(sorted(self.cached))
        for widget_id, is_open in self.opened.items():
            widget = client.widget_states.widgets.add()
            widget.id, widget.bool_value = widget_id, is_open
        if click is not None:
            widget = client.widget_states.widgets.add()
            widget.id, widget.trigger_value = click, True
        before = sample(self.pids).cpu_s
        self._ws.send(message.SerializeToString())
        sent = self._read_run()
        return RunCost(sample(self.pids).cpu_s - before, sent)

    def _read_run(self) -> int:
        sent = 0
        fragment_run = False
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            raw = self._ws.recv(timeout=max(deadline - time.monotonic(), 0.1))
            sent += len(raw)
            message = ForwardMsg()
            message.ParseFromString(raw)
            kind = message.WhichOneof("type")
            if message.metadata.cacheable:
                self.cached.add(message.hash)
            if kind == "new_session":
                self.page_script_hash = message.new_session.page_script_hash
                fragment_run = bool(message.metadata.run.fragment_ids)
                if not fragment_run:  # a full run draws the whole page anew; a fragment's, only its own part
                    self.expanders, self.buttons, self.fragments, self.markdown = {}, {}, {}, []
            elif kind == "delta":
                self._note(message.delta)
            elif kind == "script_finished":
                if message.script_finished in (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY):
                    return sent
                if message.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    raise RuntimeError("the page did not compile")
            elif kind == "delta" and message.delta.new_element.WhichOneof("type") == "exception":
                raise RuntimeError(message.delta.new_element.exception.message)

    def _note(self, delta: object) -> None:
        which = delta.WhichOneof("type")
        if which == "add_block" and delta.add_block.WhichOneof("type") == "expandable" and delta.add_block.id:
            self.expanders[delta.add_block.expandable.label] = delta.add_block.id
            self.fragments[delta.add_block.expandable.label] = delta.fragment_id
        elif which == "new_element":
            element = delta.new_element
            kind = element.WhichOneof("type")
            if kind == "button":
                self.buttons[element.button.label] = element.button.id
            elif kind == "markdown":
                self.markdown.append(element.markdown.body)
            elif kind == "exception":
                raise RuntimeError(f"the page raised: {element.exception.message}")

    def widget(self, found: dict[str, str], label: str) -> str | None:
        return next((widget_id for name, widget_id in found.items() if name.startswith(label)), None)


# -- one checkout ------------------------------------------------------------------------


@dataclass(frozen=True)
class PanelCost:
    panel: str
    open: RunCost
    rerun: RunCost
    next_page: RunCost | None


@dataclass(frozen=True)
class CheckoutCost:
    label: str
    first: RunCost
    closed: RunCost
    panels: tuple[PanelCost, ...]


def mean_cost(costs: Sequence[RunCost]) -> RunCost:
    """The mean: ``/proc`` counts CPU in clock ticks (10 ms here), coarser than a short run, and a mean of many runs
    is not rounded to a tick as a median is."""
    return RunCost(statistics.fmean(c.cpu_s for c in costs), int(statistics.fmean(c.sent_bytes for c in costs)))


def median_cost(costs: Sequence[RunCost]) -> RunCost:
    return RunCost(statistics.median(c.cpu_s for c in costs), int(statistics.median(c.sent_bytes for c in costs)))


def measure(label: str, app: Path, data_dir: Path, secret: str, conversation_id: str, repeats: int) -> CheckoutCost:
    env = app_env(None, str(data_dir))
    with streamlit_server(app, env, 120, data_dir / "streamlit.log") as (url, pid):
        tab = Tab(url, secret, conversation_id, [pid])
        with tab.open():
            tab.run()  # the process's first page: it imports and loads what every later page shares
            tab.run()
            closed = median_cost([tab.run() for _ in range(repeats)])
        panels, opens = [], []
        for name in LAZY_PANELS:  # each in a tab of its own: what one panel's opening costs, nothing kept from another's
            tab = Tab(url, secret, conversation_id, [pid])
            with tab.open():
                opens.append(tab.run())  # the page opens in a warm process: the conversation is read from the store
                panels.append(measure_panel(tab, name, repeats))
    return CheckoutCost(label, median_cost(opens), closed, tuple(panels))


def measure_panel(tab: Tab, name: str, repeats: int) -> PanelCost:
    widget_id = tab.widget(tab.expanders, name)
    if widget_id is None:
        raise RuntimeError(f"the page drew no expander {name!r}; labels seen: {sorted(tab.expanders)}")
    tab.opened[widget_id] = True
    opened = tab.run()
    rerun = median_cost([tab.run() for _ in range(repeats)])
    button = tab.widget(tab.buttons, NEXT_PAGE)
    next_page = tab.run(click=button) if button is not None else None
    return PanelCost(name, opened, rerun, next_page)


def conversation_of(turns: int) -> ShortTermMemory:
    """A conversation of ``turns`` turns of the short model, each followed by the page's fold ahead."""
    memory = ShortTermMemory(ShortModel())
    for number in range(1, turns + 1):
        with memory.turn(f"Message {number}: how do I ask politely for a late checkout at the hotel?") as turn:
            turn.run()
        memory.prefold()
    return memory


@dataclass(frozen=True)
class TurnBoxCost:
    """What runs cost on a conversation of ``turns`` turns: boxes collapsed, the newest box opened, a rerun while
    it is open. Where the box has no open state of its own, the browser opens it alone (``open`` None) and a rerun
    costs the same whether it is open or not."""

    label: str
    turns: int
    closed: RunCost
    open: RunCost | None
    rerun_open: RunCost | None


def measure_turn_box(label: str, app: Path, data_dir: Path, secret: str, conversation_id: str, turns: int, repeats: int) -> TurnBoxCost:
    env = app_env(None, str(data_dir))
    with streamlit_server(app, env, 120, data_dir / "streamlit.log") as (url, pid):
        tab = Tab(url, secret, conversation_id, [pid])
        with tab.open():
            tab.run()  # the process's first page: it imports and loads what every later page shares
            tab.run()
            closed = mean_cost([tab.run() for _ in range(repeats)])
            if not any(f"Message {turns}:" in body for body in tab.markdown):
                raise RuntimeError(f"{label} did not open the saved conversation: its saved format is not this checkout's")
            box = f"Turn {turns}: tokens and context"
            widget_id = tab.expanders.get(box)
            if widget_id is None:  # drawn whole on every run: open, it costs what a collapsed one does
                return TurnBoxCost(label, turns, closed, None, closed)
            fragment_id = tab.fragments[box]
            opens = []
            for _ in range(repeats):
                tab.opened[widget_id] = True
                opens.append(tab.run(fragment_id=fragment_id))
                tab.opened[widget_id] = False
                tab.run(fragment_id=fragment_id)
            tab.opened[widget_id] = True
            tab.run(fragment_id=fragment_id)
            rerun = mean_cost([tab.run() for _ in range(repeats)])
    return TurnBoxCost(label, turns, closed, mean_cost(opens), rerun)


# -- the report --------------------------------------------------------------------------


def cell(cost: RunCost | None) -> str:
    return "-" if cost is None else f"{cost.cpu_s:.2f} s, {cost.sent_bytes / 1000:,.0f} kB"


def cell_ms(cost: RunCost | None) -> str:
    return "-" if cost is None else f"{cost.cpu_s * 1000:.1f} ms, {cost.sent_bytes / 1000:,.0f} kB"


def ratio(cost: RunCost | None, base: RunCost | None) -> str:
    if cost is None or base is None:
        return ""
    cpu = f"{cost.cpu_s / base.cpu_s:.2f}x" if base.cpu_s else "-"
    return f" ({cpu} CPU, {cost.sent_bytes / base.sent_bytes:.2f}x bytes)" if base.sent_bytes else ""


def report(results: Sequence[CheckoutCost], turns: int, size: int, repeats: int) -> str:
    base = results[0]
    lines = [
        f"A conversation of {turns:,} turns, {size / 1024:,.0f} KiB saved; CPU-seconds of the server and kB sent per run "
        f"(reruns: median of {repeats}); ratios to {base.label}",
        "",
        "| run | " + " | ".join(r.label for r in results) + " |",
        "|---|" + "--:|" * len(results),
        "| page opens in a warm process (conversation read from the store; median of the panels' tabs) | "
        + " | ".join(cell(r.first) + (ratio(r.first, base.first) if r is not base else "") for r in results)
        + " |",
        "| rerun, panels closed | "
        + " | ".join(cell(r.closed) + (ratio(r.closed, base.closed) if r is not base else "") for r in results)
        + " |",
    ]
    for index, name in enumerate(LAZY_PANELS):
        for what in ("open", "rerun", "next_page"):
            costs = [getattr(r.panels[index], what) for r in results]
            if all(c is None for c in costs):
                continue
            base_cost = costs[0]
            label = {"open": "opening", "rerun": "rerun while open", "next_page": "next (older) page"}[what]
            lines.append(
                f"| {name}: {label} | " + " | ".join(cell(c) + (ratio(c, base_cost) if i else "") for i, c in enumerate(costs)) + " |"
            )
    return "\n".join(lines)


TURN_BOX_RUNS = (
    ("closed", "rerun, turn boxes collapsed"),
    ("open", "opening the newest turn box"),
    ("rerun_open", "rerun, newest box open"),
)
"""The ``TurnBoxCost`` fields, with their rows' words."""


def turn_box_report(results: Sequence[TurnBoxCost], repeats: int) -> str:
    labels = list(dict.fromkeys(r.label for r in results))
    lines = [
        f"CPU-milliseconds of the server and kB sent per run (mean of {repeats}), by the conversation's length; ratios to {labels[0]}",
        "",
        "| run | " + " | ".join(labels) + " |",
        "|---|" + "--:|" * len(labels),
    ]
    for turns in dict.fromkeys(r.turns for r in results):
        row = {r.label: r for r in results if r.turns == turns}
        for what, words in TURN_BOX_RUNS:
            costs = [getattr(row[label], what) if label in row else None for label in labels]
            base = costs[0]
            cells = [cell_ms(c) + (ratio(c, base) if i else "") for i, c in enumerate(costs)]
            lines.append(f"| turn {turns}: {words} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main_turns(args: argparse.Namespace) -> None:
    """``--turns``: each conversation length in turn, each checkout on it, side by side."""
    results = []
    with tempfile.TemporaryDirectory(prefix="memora-turns-") as folder:
        for turns in args.turns:
            memory = conversation_of(turns)
            for number, app in enumerate(args.apps):
                data_dir = Path(folder) / f"{turns}-{number}"
                data_dir.mkdir()
                secret, conversation_id = saved_store(memory, data_dir)
                label = str(app) if len(args.apps) > 1 else "this checkout"
                results.append(measure_turn_box(label, app.resolve(), data_dir, secret, conversation_id, turns, args.repeats))
                print(turn_box_report(results, args.repeats), file=sys.stderr)
    print(turn_box_report(results, args.repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", nargs="+", type=Path, default=[ROOT], help="checkouts to compare, each in turn")
    parser.add_argument("--kb", type=int, default=1024, help="the conversation's saved size, KiB (MEMORA_MAX_CONVERSATION_KB)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--turns", type=int, nargs="+", default=[], help="conversations of these many turns: the turn boxes' cost")
    args = parser.parse_args()
    if args.turns:
        main_turns(args)
        return
    began = time.perf_counter()
    memory, size = capped_conversation(args.kb * 1024)
    turns = len(memory.history) // 2
    print(f"built {turns} turns, {size:,} bytes saved, in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    results = []
    with tempfile.TemporaryDirectory(prefix="memora-panels-") as folder:
        for number, app in enumerate(args.apps):
            data_dir = Path(folder) / str(number)
            data_dir.mkdir()
            secret, conversation_id = saved_store(memory, data_dir)
            label = str(app) if len(args.apps) > 1 else "this checkout"
            results.append(measure(label, app.resolve(), data_dir, secret, conversation_id, args.repeats))
            print(report(results, turns, size, args.repeats), file=sys.stderr)
    print(report(results, turns, size, args.repeats))


if __name__ == "__main__":
    main()
