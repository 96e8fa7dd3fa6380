"""``python -m benchmarks.memory.real --peers``: the peer libraries with a real server writing their summaries.

Plumbing, against a fake server that records every request: each peer's own summary prompt reaches the server
as the library built it, capped at the summary cap; the model's text comes back to the library as it wrote it and
is what the next reply request carries; replies go to the server's model at the reply cap; every request is
probed and priced. The peer libraries are optional (requirements-bench.txt): a test that needs one that is not
installed is skipped, with the reason.
"""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.memory import peers
from benchmarks.memory.probing import uncopied
from benchmarks.memory.questions import QUESTIONS
from benchmarks.memory.real import main
from benchmarks.memory.script import make_script
from benchmarks.memory.strategies import Limits
from memora.memory.backend import CHAT_SERVER_PROFILE
from memora.text.messages import Message
from memora.text.prompts import SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter
from tests.support.fakes import ScriptedBackend

real_peers = pytest.importorskip("benchmarks.memory.real_peers")


def _installed(keys):
    missing = peers.missing_libraries()
    for key in keys:
        library = peers.PEERS[key][0]
        reason = f"{peers.LIBRARIES[library].label}: {library} is not installed (pip install -r requirements-bench.txt)"
        yield pytest.param(key, marks=pytest.mark.skipif(library in missing, reason=reason), id=key)


SUMMARIZING = [key for key, (_, cls) in peers.PEERS.items() if key != "agents-trimming"]


def _model_server() -> ScriptedBackend:
    """A fake server: a summary prompt (no system prompt of Memora's) is answered with a numbered fact block."""

    def answer(request):
        if request.instructions == SYSTEM_PROMPT:
            return f"reply to {request.messages[-1].content[:20]}"
        written = sum(1 for r in server.replies if r.instructions != SYSTEM_PROMPT)
        return f"<facts><fact>model summary {written}</fact></facts>"

    server = ScriptedBackend(profile=CHAT_SERVER_PROFILE, reply_text=answer)
    return server


@pytest.mark.parametrize("key", list(_installed(SUMMARIZING)))
def test_a_peers_own_summary_prompt_goes_to_the_server_and_its_text_comes_back_to_the_library(key):
    server = _model_server()
    script = make_script(24, seed=11)
    writers: list = []
    checkpoints = real_peers.play_peer(
        server,
        "qwen",
        script,
        [12, 24],
        key,
        real_peers.TUNED_AT_1000[key],
        Limits(1000, 3),
        summary_cap=150,
        reply_tokens=48,
        ask_questions=True,
        summarizer=writers,
    )
    (writer,) = writers
    summaries = [r for r in server.replies if r.instructions != SYSTEM_PROMPT]
    # What the adapter sent is what the server got: the library's prompt as its messages, no system prompt of
    # Memora's, at the server's model and the summary cap.
    assert summaries, f"{key} never summarized 24 turns at a 1,000-token budget"
    assert [r.messages for r in summaries] == writer.sent
    assert all(r.model == "qwen" and r.max_output_tokens == 150 for r in summaries)
    # Each prompt is the library's own, with the conversation it folds: a user message or a reply is in it.
    said = [*script.user_messages, *(f"reply to {m[:20]}" for m in script.user_messages)]
    assert all(any(text in "\n".join(m.content for m in r.messages) for text in said) for r in summaries)
    # The model's text, not the bench's extractive summary, is what the library sends on with a later reply.
    replies = [r for r in server.replies if r.instructions == SYSTEM_PROMPT and r.messages[-1].content not in QUESTIONS.values()]
    later = "\n".join(m.content for r in replies for m in r.messages)
    assert re.search(r"model summary \d+", later)
    assert len(replies) == 24 and all(r.model == "qwen" and r.max_output_tokens == 48 for r in replies)
    last = checkpoints[-1]
    assert last.summaries == len(summaries) and last.refused == 0
    # Summary requests are priced and checked against the budget as replies are, by o200k_base.
    largest = max(LocalTokenCounter().count("gpt-5-mini", "", r.messages) for r in summaries)
    assert last.largest_summary_input == largest and last.usd_per_100_turns > 0
    assert last.summaries_over_budget == sum(1 for r in summaries if LocalTokenCounter().count("gpt-5-mini", "", r.messages) > 1000)
    assert last.asked > 0 and last.probed > 0


@pytest.mark.parametrize("key", list(_installed(["agents-trimming"])))
def test_a_peer_that_keeps_no_summary_sends_the_server_only_replies(key):
    server = _model_server()
    script = make_script(12, seed=11)
    (last,) = real_peers.play_peer(server, "qwen", script, [12], key, None, Limits(1000, 3), summary_cap=150, reply_tokens=48)
    assert len(server.replies) == 12 and all(r.instructions == SYSTEM_PROMPT for r in server.replies)
    assert last.summaries == 0 and last.largest_summary_input == 0 and last.usd_per_100_turns > 0


def test_a_summary_pasted_into_a_user_message_of_the_memorys_own_is_not_scored_as_remembering():
    said = ["My name is Amy.", "I live in Taipei."]
    # LangChain's SummarizationMiddleware sends its summary as a user message; the recent window's messages are whole.
    summary = Message("user", "Here is a summary of the conversation to date:\n\nMy name is Amy.   I live in Taipei.")
    kept = [summary, Message("user", said[1]), Message("assistant", "My name is Amy, you said."), Message("user", "Hi")]
    out = uncopied(kept, said, "Hi")
    assert "Amy" not in out[0].content and "Taipei" not in out[0].content
    assert out[1:] == kept[1:]


def test_peers_that_are_not_known_are_refused_with_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        main(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--peers", "langchain-middlewar"])
    err = capsys.readouterr().err
    assert "unknown peers langchain-middlewar" in err and "langchain-middleware" in err


@pytest.mark.skipif("langchain" in peers.missing_libraries(), reason="langchain is not installed (pip install -r requirements-bench.txt)")
def test_the_cli_plays_each_row_and_writes_each_rows_summaries(tmp_path, monkeypatch):
    server = _model_server()
    monkeypatch.setattr("memora.backends.chat_completions.ChatCompletionsBackend", lambda client: server)
    out, texts = tmp_path / "rows.json", tmp_path / "summaries.json"
    args = ["--base-url", "http://127.0.0.1:9/v1", "--model", "qwen", "--turns", "16", "--every", "8", "--seed", "11"]
    args += ["--peers", "langchain-middleware", "--knob", "langchain-middleware=300", "--json", str(out), "--summaries", str(texts)]
    assert main(args) == 0
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert list(rows) == ["Memora, watermark policy", "LangChain v1 SummarizationMiddleware (keep tokens=300)"]
    written = json.loads(texts.read_text(encoding="utf-8"))
    middleware = written["LangChain v1 SummarizationMiddleware (keep tokens=300)"]
    assert middleware and all(w["text"].startswith("<facts><fact>model summary") for w in middleware)
    assert len(middleware) == rows["LangChain v1 SummarizationMiddleware (keep tokens=300)"][-1]["summaries"]


def test_the_table_reads_the_seed_from_each_files_name_or_says_it_cannot(tmp_path, capsys):
    from benchmarks.memory.real_table import cells, table
    from benchmarks.memory.real_table import main as table_main

    (tmp_path / "a-11-w.json").write_text(json.dumps({"Memora": [{"so_far": 0.25, "answered_so_far": 0.5, "asked": 4}]}))
    (tmp_path / "a-12-w.json").write_text(json.dumps({"Memora": [{"so_far": 0.0, "answered_so_far": None, "asked": 0}]}))
    peer = {"so_far": 0.5, "answered_so_far": 1.0, "asked": 2, "usd_per_100_turns": 0.04, "summaries_over_budget": 2}
    (tmp_path / "a-12-p.json").write_text(json.dumps({"Peer": [{**peer, "largest_summary_input": 1200}]}))
    found = cells([str(tmp_path / n) for n in ("a-11-w.json", "a-12-w.json", "a-12-p.json")])
    lines = table(found).splitlines()
    assert lines[2] == "| Memora | 0.25 / 0.50 (4) | $0.0000 | 0 / 0 (0) | 0.00 / n/a (0) | $0.0000 | 0 / 0 (0) |"
    assert lines[3] == "| Peer | - | - | - | 0.50 / 1.00 (2) | $0.0400 | 0 / 2 (1,200) |"
    (tmp_path / "noseed.json").write_text("{}")
    assert table_main([str(tmp_path / "noseed.json")]) == 2
    assert "no seed in the name" in capsys.readouterr().err
