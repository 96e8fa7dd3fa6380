"""``python -m benchmarks.memory --peers``: the $ figures, the missing-peer message, and each installed peer's wiring.

The peer libraries are optional (requirements-bench.txt); a test that needs one
that is not installed is skipped, with the reason. No timing is asserted.
"""

from __future__ import annotations

import pytest

from benchmarks.memory import peers
from benchmarks.memory.recording import SUMMARY_TOKEN_CAP, Call, RecordingBackend
from benchmarks.memory.run import list_price, replay, token_figures, usd_per_100_turns
from benchmarks.memory.script import make_script
from benchmarks.memory.strategies import Limits
from memora.teaching.prices import ModelPrice
from memora.tokens import count_text


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
    assert peers.peer_factories(missing=list(peers.LIBRARIES)) == {}


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
    calls = {}

    def fake_run(**kwargs):
        calls.update(kwargs)
        return bench_run.run(conversation_turns=(6,), history_turns=(2, 4), ttft_turns=2, repeats=1, budgets=(), **kwargs)

    monkeypatch.setattr(bench_main, "run", fake_run)
    assert bench_main.main(["--peers", "1000", "--delay-ms", "1"]) == 0
    out, err = capsys.readouterr()
    assert "pip install" in err and "requirements-bench.txt" in err
    assert calls["peer_budgets"] == (1000,)
    assert "Left out, library not installed" in out
    assert "$ per 100 turns" in out


def test_summary_recorder_merges_only_new_user_messages_and_caps_the_summary():
    backend = RecordingBackend(replies=("ok",))
    recorder = peers.SummaryRecorder(backend)
    recorder.user_said("My name is Amy.")
    recorder.user_said("I live in Taipei.")
    first = recorder.summarize([peers.Message("user", "Human: My name is Amy.\nAI: ok")])
    assert first == "- My name is Amy."
    # The old summary comes back in the prompt; only the new message is merged in.
    second = recorder.summarize([peers.Message("user", f"{first}\nHuman: I live in Taipei.")])
    assert second == "- My name is Amy.\n- I live in Taipei."
    assert [c.kind for c in backend.calls] == ["summary", "summary"]
    for _ in range(80):
        recorder.user_said("I want to practise talking about my work at the bank every day.")
        recorder.user_said(f"My goal {len(recorder.summary)} is to speak clearly in long meetings with customers.")
    assert count_text(recorder.summarize([peers.Message("user", "\n".join(recorder.pending))])) <= SUMMARY_TOKEN_CAP


def _peer_params(holdable_only: bool = False):
    missing = peers.missing_libraries()
    for key, (library, cls) in peers.PEERS.items():
        if holdable_only and not cls.holdable:
            continue
        reason = f"{peers.LIBRARIES[library].label}: {library} is not installed (pip install -r requirements-bench.txt)"
        yield pytest.param(key, marks=pytest.mark.skipif(library in missing, reason=reason), id=key)


@pytest.mark.parametrize("key", list(_peer_params()))
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_installed_peer_replays_the_script_and_records_what_it_sends(key):
    _, cls = peers.PEERS[key]
    script = make_script(40, seed=3)
    limits = Limits(600, 3)
    for fitted in (False, True):
        peer, _ = replay(lambda b, lim, cls=cls, fitted=fitted: cls(b, lim, fitted), script, limits)
        figures = token_figures(key, peer.backend, 40, limits.max_input_tokens, limits.max_recent_turns)
        assert figures.calls["reply"] == 40
        assert figures.input_tokens > 0 and figures.usd_per_100_turns["total"] > 0
        # Every summary it asked for came from the recording fake, capped like Memora's.
        summaries = [c for c in peer.backend.calls if c.kind == "summary"]
        assert all(0 < c.output_tokens <= SUMMARY_TOKEN_CAP for c in summaries)
        if "summary" in key or key in ("langmem", "langchain-middleware"):
            assert summaries, f"{key} never summarized 40 turns at a 600-token budget"
            assert peer.recorder.summary


@pytest.mark.parametrize("key", list(_peer_params(holdable_only=True)))
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_lowered_peer_runs_its_fitted_knob_lower_and_says_so(key):
    script = make_script(40, seed=3)
    limits = Limits(600, 3)
    fitted, _ = replay(peers.peer_factories()[f"{key}-fitted"], script, limits)
    lowered, _ = replay(peers.lowered_peer(key, 100), script, limits)

    assert "lowered (" in lowered.name and lowered.name.startswith(fitted.name.removesuffix(", fitted"))
    knob = int(lowered.name.rsplit("=", 1)[1].rstrip(")").replace(",", ""))
    sent = [c.input_tokens for c in lowered.backend.calls if c.kind == "reply"]
    assert len(sent) == 40 and knob > 0
    # Less room for history: it never sends more in all than the fitted run.
    assert sum(sent) <= sum(c.input_tokens for c in fitted.backend.calls if c.kind == "reply")


def test_only_a_fitted_token_knob_can_be_lowered():
    class TokenKnob(peers._Peer):
        holdable = True

    backend = RecordingBackend(("r",))
    with pytest.raises(ValueError, match="only a fitted token knob"):
        peers._Peer(backend, Limits(), True, lower_by=50)
    with pytest.raises(ValueError, match="only a fitted token knob"):
        TokenKnob(backend, Limits(), False, lower_by=50)
    assert TokenKnob(backend, Limits(), True, lower_by=50).lower_by == 50
