"""``python -m benchmarks.memory --peers``: the $ figures, the missing-peer message, and each installed peer's wiring.

The peer libraries are optional (requirements-bench.txt); a test that needs one
that is not installed is skipped, with the reason. No timing is asserted.
"""

from __future__ import annotations

import pytest

from benchmarks.memory import peers
from benchmarks.memory.recording import Call, RecordingBackend
from benchmarks.memory.run import list_price, replay, token_figures, usd_per_100_turns
from benchmarks.memory.script import make_script
from benchmarks.memory.strategies import Limits
from memora.teaching.prices import ModelPrice
from memora.text.tokens import count_text


def test_usd_per_100_turns_prices_reply_and_summary_input_and_output_apart():
    price = ModelPrice("m", input=1.0, cached_input=0.1, output=10.0)
    calls = [
        Call(1, "reply", 1_000_000, 100_000),
        Call(1, "summary", 200_000, 50_000),
        Call(2, "count", 999_999, 0),  # count requests bill nothing
        Call(2, "reply", 1_000_000, 100_000),
    ]
    usd = usd_per_100_turns(calls, turns=200, price=price)
    # 200 turns -> half of it per 100 turns.
    assert usd == pytest.approx({"reply_input": 1.0, "reply_output": 1.0, "summary_input": 0.1, "summary_output": 0.25, "total": 2.35})
    assert usd_per_100_turns([], turns=0, price=price)["total"] == 0


def test_list_price_is_read_from_the_dated_price_table():
    from memora.teaching.prices import PriceTable

    assert list_price() == PriceTable().price_for("gpt-5-mini")


def test_missing_peer_message_names_each_library_and_the_exact_pip_command():
    missing = peers.missing_libraries(importable=lambda module: not module.startswith(("langmem", "agents")))
    assert missing == ["langmem", "openai-agents"]
    message = peers.missing_message(missing)
    assert "langmem summarize_messages (langmem)" in message
    assert "OpenAI Agents SDK" in message
    assert "python -m pip install 'langmem>=0.0.29,<0.1' 'openai-agents>=0.24,<0.25'" in message
    assert "requirements-bench.txt" in message
    assert peers.missing_message([]) == ""
    assert peers.installed_peers(missing=list(peers.LIBRARIES)) == []


def test_requirements_bench_lists_every_peer_library_with_its_range():
    with open("requirements-bench.txt", encoding="utf-8") as f:
        lines = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    for library in peers.LIBRARIES.values():
        assert library.requirement in lines


def test_peers_flag_with_every_library_missing_names_them_and_still_exits_0(monkeypatch, capsys):
    from benchmarks.memory import __main__ as bench_main
    from benchmarks.memory import run as bench_run

    monkeypatch.setattr(peers, "missing_libraries", lambda importable=None: list(peers.LIBRARIES))
    monkeypatch.setattr(bench_main, "missing_libraries", lambda: list(peers.LIBRARIES))

    def small_run(**kwargs):
        return bench_run.run(conversation_turns=(6,), history_turns=(2, 4), ttft_turns=2, repeats=1, budgets=(), **kwargs)

    budgets = []
    real_sweep = bench_main.sweep
    monkeypatch.setattr(bench_main, "run", small_run)
    monkeypatch.setattr(
        bench_main, "sweep", lambda peer_budgets, *a, **k: budgets.append(peer_budgets) or real_sweep(peer_budgets, *a, **k)
    )
    argv = ["--peers", "1000", "--delay-ms", "1", "--jobs", "1", "--sweep-turns", "6", "--caps", "60"]
    assert bench_main.main(argv) == 0
    out, err = capsys.readouterr()
    assert "pip install" in err and "requirements-bench.txt" in err
    assert budgets == [(1000,)]
    assert "Left out, library not installed" in out
    assert "| memora-watermark+prefold | beginning | 60 |" in out and "retention" in out
    # The other cut rule, as a sensitivity row; the page's own row is the window with prefold.
    assert "| memora-watermark+prefold | newest | 60 |" in out and "| memora+prefold | beginning | 60 |" in out


def test_summary_recorder_merges_only_new_user_messages_and_cuts_the_summary_at_the_backends_rule():
    backend = RecordingBackend(replies=("ok",), summary_cap=60)
    recorder = peers.SummaryRecorder(backend)
    recorder.user_said("My name is Amy.")
    recorder.user_said("I live in Taipei.")
    first = recorder.summarize([peers.Message("user", "Human: My name is Amy.\nAI: ok")])
    assert first == "- My name is Amy."
    # The old summary comes back in the prompt; only the new message is merged in.
    second = recorder.summarize([peers.Message("user", f"{first}\nHuman: I live in Taipei.")])
    assert second == "- My name is Amy.\n- I live in Taipei."
    assert [c.kind for c in backend.calls] == ["summary", "summary"]
    for n in range(20):
        recorder.user_said(f"我每天通勤的時候會聽英文 Podcast 第 {n} 集，覺得很有幫助。")
    recorder.user_said("Actually I'm B2, not B1.")
    pending = list(recorder.pending)
    last = recorder.summarize([peers.Message("user", "\n".join(pending))])
    assert count_text(last) <= 60
    # Over the cap, by default, the beginning stays, as Memora's own summarizer keeps it: the newest line goes.
    assert last.startswith("- 我每天通勤") and "B2" not in last
    newest = peers.SummaryRecorder(RecordingBackend(replies=("ok",), summary_cap=60, cut="newest"), summary=second, pending=pending)
    cut_newest = newest.summarize([peers.Message("user", "\n".join(pending))])
    assert count_text(cut_newest) <= 60
    assert cut_newest.endswith("- Actually I'm B2, not B1.") and "Amy" not in cut_newest


def _peer_params(tunable_only: bool = False):
    missing = peers.missing_libraries()
    for key, (library, cls) in peers.PEERS.items():
        if tunable_only and not cls.tunable:
            continue
        reason = f"{peers.LIBRARIES[library].label}: {library} is not installed (pip install -r requirements-bench.txt)"
        yield pytest.param(key, marks=pytest.mark.skipif(library in missing, reason=reason), id=key)


@pytest.mark.parametrize("key", list(_peer_params()))
def test_installed_peer_replays_the_script_records_what_it_sends_and_is_probed(key):
    script = make_script(40, seed=3)
    limits = Limits(600, 3)
    peer, _ = replay(peers.peer_factory(key), script, limits, summary_cap=100)
    figures = token_figures(key, peer.backend, 40, limits.max_input_tokens, limits.max_recent_turns)
    assert figures.calls["reply"] == 40
    assert figures.input_tokens > 0 and figures.usd_per_100_turns["total"] > 0
    # Every reply request was probed for the planted facts due at its turn.
    assert figures.facts_probed > 0 and figures.recalled + figures.stale + figures.missing == figures.facts_probed
    # Every summary it asked for came from the recording fake, within the backend's cap (a fact block's lines
    # are, each wrapped in its <fact> tags).
    summaries = [c for c in peer.backend.calls if c.kind == "summary"]
    assert all(c.output_tokens > 0 for c in summaries)
    assert count_text(peer.recorder.summary) <= 100
    if key != "llamaindex-memory":
        assert all(c.output_tokens <= 100 for c in summaries)
    if key != "agents-trimming":
        assert summaries, f"{key} never summarized 40 turns at a 600-token budget"
        assert peer.recorder.summary
    assert ("deprecated" in peer.name) == (key in ("langchain-summary-buffer", "llamaindex-chat-summary"))


@pytest.mark.parametrize("key", list(_peer_params(tunable_only=True)))
def test_a_peer_names_its_knob_and_a_lower_knob_sends_no_more(key):
    script = make_script(40, seed=3)
    limits = Limits(600, 3)
    default = peers.PEERS[key][1].default_knob(limits)
    high, _ = replay(peers.peer_factory(key), script, limits)
    low, _ = replay(peers.peer_factory(key, default - 200), script, limits)

    assert high.name.endswith(f"={default:,})") and low.name.endswith(f"={default - 200:,})")
    sent = [c.input_tokens for c in low.backend.calls if c.kind == "reply"]
    assert len(sent) == 40
    assert max(sent) <= max(c.input_tokens for c in high.backend.calls if c.kind == "reply")


@pytest.mark.skipif("langmem" in peers.missing_libraries(), reason="langmem is not installed (pip install -r requirements-bench.txt)")
def test_langmem_requests_without_the_current_message_are_counted():
    # langchain-ai/langmem#77: with little room after a summary, langmem folds the current message into it.
    script = make_script(60, seed=11)
    limits = Limits(1000, 3)
    peer, _ = replay(peers.peer_factory("langmem", 335), script, limits)
    replies = [c for c in peer.backend.calls if c.kind == "reply"]
    figures = token_figures("langmem", peer.backend, 60, 1000, 3)
    assert figures.without_current == sum(1 for c in replies if not c.has_current) > 0


@pytest.mark.skipif("langchain" in peers.missing_libraries(), reason="langchain is not installed (pip install -r requirements-bench.txt)")
def test_the_middlewares_summary_requests_are_checked_against_the_budget_as_memoras_are():
    # SummarizationMiddleware triggers at the budget and then sends the whole of it, with its prompt, to be summarized.
    script = make_script(60, seed=11)
    limits = Limits(1000, 3)
    peer, _ = replay(peers.peer_factory("langchain-middleware"), script, limits)
    figures = token_figures("middleware", peer.backend, 60, 1000, 3)
    summaries = [c.input_tokens for c in peer.backend.calls if c.kind == "summary"]
    assert figures.summary_over_budget == sum(1 for n in summaries if n > 1000) > 0
    assert figures.largest_summary_input == max(summaries) > 1000
