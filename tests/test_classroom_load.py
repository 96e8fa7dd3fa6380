"""The classroom benchmark's students speak Streamlit's own protocol to a real `streamlit run`.

What they send must reach the model as the page's user messages, and the timings
they report must come from the reply they were given, not from other text on the page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from benchmarks.classroom_load import PacedChatServer, Student, check_cluster, postgres_cluster, wave
from benchmarks.harness.processes import ROOT, streamlit_process, streamlit_run
from benchmarks.page_rerun import Tab, capped_conversation, conversation_of, measure_panel, measure_turn_box, saved_store


def page_env(tmp_path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    return {**env, "MEMORA_DATA_DIR": str(tmp_path), **settings}


def chat(url: str, messages: int, offline: bool):
    args = argparse.Namespace(offline=offline, messages=messages, think=0.0)
    crowd, _ = asyncio.run(wave(url.replace("http://", "ws://") + "/_stcore/stream", 1, args, pids=[], seed=0))
    return crowd[0]


def test_a_simulated_student_chats_with_the_model_through_the_real_page(tmp_path):
    with PacedChatServer(latency_s=0.2, rate=100.0, reply_tokens=6) as model:
        env = page_env(tmp_path, MEMORA_BACKEND="chat", MEMORA_BASE_URL=model.url, MEMORA_MODEL="paced")
        with streamlit_run(env, tmp_path / "streamlit.log") as url:
            student = chat(url, messages=2, offline=False)

    replies = [r for r in model.requests if r.body.get("stream")]
    # Each message reached the model as the request's current user message, in order.
    assert [r.body["messages"][-1]["content"].split(":")[0] for r in replies] == ["Message s1m0", "Message s1m1"]
    # The second request carries the first turn, reply included: the page committed it.
    assert any(m["role"] == "assistant" and "(end s1m0)" in m["content"] for m in replies[1].body["messages"])
    assert [t.error for t in student.turns] == [None, None]
    for turn in student.turns:
        assert turn.first_token_s is not None and turn.done_s is not None
        assert 0.2 <= turn.first_token_s <= turn.done_s  # no earlier text on the page passed for the reply
    # The reply was drawn by the tail fragment, whose runs the student asked for as a browser does.
    assert student.fragment_reruns > 0
    # After each reply the student opened the newest turn's box, in a run of the fragment that draws it, which drew it.
    assert sorted(student.turn_boxes) == [1, 2] and all(fragment for _, fragment in student.turn_boxes.values())
    assert student.boxes_opened == 2 and student.opened == {widget_id for widget_id, _ in student.turn_boxes.values()}


def test_a_simulated_student_gets_the_offline_explanation(tmp_path):
    with streamlit_run(page_env(tmp_path, MEMORA_BACKEND="offline"), tmp_path / "streamlit.log") as url:
        student = chat(url, messages=2, offline=True)

    assert [t.error for t in student.turns] == [None, None]
    for turn in student.turns:
        assert turn.first_token_s is not None and turn.done_s is not None
        assert turn.first_token_s <= turn.done_s


def test_the_panel_benchmark_opens_a_saved_conversation_and_pages_its_earlier_messages(tmp_path):
    memory, size = capped_conversation(60 * 1024)
    assert size <= 60 * 1024 and len(memory.history) > 40
    secret, conversation_id = saved_store(memory, tmp_path)
    with streamlit_process(page_env(tmp_path, MEMORA_BACKEND="offline"), tmp_path / "streamlit.log") as (url, process):
        tab = Tab(url, secret, conversation_id, [process.pid])
        with tab.open():
            first = tab.run()
            # The conversation came back from the store, under the browser's cookie: its older messages wait folded away.
            older = len(memory.history) - 20
            assert f"Earlier messages ({older})" in tab.expanders
            cost = measure_panel(tab, "Earlier messages", repeats=1)
    assert first.sent_bytes > 0 and cost.open.sent_bytes > 0
    assert cost.next_page is not None  # the open panel drew its pager, and the benchmark turned a page with it


def test_the_panel_benchmark_opens_the_newest_turn_box_in_a_run_of_its_fragment(tmp_path):
    memory = conversation_of(3)
    assert len(memory.history) == 6
    secret, conversation_id = saved_store(memory, tmp_path)
    cost = measure_turn_box("this checkout", ROOT, tmp_path, secret, conversation_id, turns=3, repeats=1)
    # The box was found by its title, opened by its widget state, and its fragment's run drew it.
    assert cost.open is not None and cost.rerun_open is not None
    assert cost.open.sent_bytes > 0 and cost.rerun_open.sent_bytes > cost.closed.sent_bytes, "open, the box sends its chart"


class RecordingSocket:
    """Records the BackMsgs a student sends, as the server would receive them."""

    def __init__(self) -> None:
        self.sent: list[BackMsg] = []

    async def send(self, raw: bytes) -> None:
        message = BackMsg()
        message.ParseFromString(raw)
        self.sent.append(message)


def forward(kind: str, run_of: tuple[str, ...] = (), **fields) -> ForwardMsg:
    message = ForwardMsg()
    if kind == "new_session":
        message.new_session.page_script_hash = "page"
        message.metadata.run.fragment_ids.extend(run_of)  # the fragments this run is for; none for a full run
    elif kind == "auto_rerun":
        message.auto_rerun.interval = fields["interval"]
        message.auto_rerun.fragment_id = fields["fragment_id"]
    elif kind == "stop_auto_rerun":
        message.stop_auto_rerun.fragment_ids.extend(fields["fragment_ids"])
    return message


def test_a_student_keeps_the_fragment_timers_as_the_browser_does():
    """auto_rerun starts one timer per fragment; stop_auto_rerun and a full run's new_session end them."""

    async def scenario() -> tuple[list[tuple[str, bool]], list[set[str]]]:
        student = Student(1, "ws://unused", offline=False, messages=0, think_s=0.0, rng=random.Random(0))
        student._ws = socket = RecordingSocket()
        alive: list[set[str]] = []
        student._on_message(forward("new_session"), 0.0)
        student._on_message(forward("auto_rerun", interval=0.05, fragment_id="tail"), 0.0)
        student._on_message(forward("auto_rerun", interval=0.05, fragment_id="other"), 0.0)
        await asyncio.sleep(0.12)
        student._on_message(forward("new_session", run_of=("tail",)), 0.0)  # a fragment's own run keeps every timer
        alive.append(set(student._timers))
        student._on_message(forward("stop_auto_rerun", fragment_ids=["other"]), 0.0)
        alive.append(set(student._timers))
        student._on_message(forward("new_session"), 0.0)  # a full run: its fragments register again
        alive.append(set(student._timers))
        sent = len(socket.sent)
        await asyncio.sleep(0.12)
        assert len(socket.sent) == sent  # no timer fires once cancelled
        return [(m.rerun_script.fragment_id, m.rerun_script.is_auto_rerun) for m in socket.sent], alive

    sent, alive = asyncio.run(scenario())
    assert alive == [{"tail", "other"}, {"tail"}, set()]
    assert {"tail", "other"} == {fragment for fragment, _ in sent}
    assert all(auto for _, auto in sent)


def test_the_benchmark_runs_a_big_class_through_memora_serve_only_on_postgresql():
    """``--serve N`` starts ``python -m memora.serve``, whose processes must share a PostgreSQL store: without one it
    stops before starting anything, and says so; ``--rolling-restart`` is offered beside it."""
    env = {k: v for k, v in os.environ.items() if k != "MEMORA_STORE_URL"}
    command = [sys.executable, "benchmarks/classroom_load.py"]
    refused = subprocess.run([*command, "--serve", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--serve needs MEMORA_STORE_URL=postgresql://" in refused.stderr
    shown = subprocess.run([*command, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "--serve N" in shown.stdout and "--rolling-restart S" in shown.stdout


def test_the_benchmark_restarts_only_a_local_cluster_named_as_pg_lsclusters_names_it():
    """``--restart-postgres`` takes VERSION/NAME and nothing that could carry more onto ``pg_ctlcluster``'s command
    line, needs ``--rolling-restart``, and refuses a MEMORA_STORE_URL on another machine before asking
    ``pg_lsclusters`` anything (whose port check needs PostgreSQL's tools, not run here)."""
    assert postgres_cluster("15/roll") == ("15", "roll")
    for text in ("15", "roll", "15/", "/roll", "15/roll;reboot", "15/roll x", "v15/roll"):
        with pytest.raises(argparse.ArgumentTypeError):
            postgres_cluster(text)
    assert "127.0.0.1 or localhost" in check_cluster(("15", "roll"), "postgresql://u:secret@db.example:5434/d")
    assert "secret" not in check_cluster(("15", "roll"), "postgresql://u:secret@db.example:5434/d")
    env = {**os.environ, "MEMORA_STORE_URL": "postgresql://u:p@127.0.0.1:5434/d"}
    command = [sys.executable, "benchmarks/classroom_load.py", "--serve", "2", "--restart-postgres", "15/roll"]
    refused = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--restart-postgres needs --rolling-restart" in refused.stderr
