"""``python -m benchmarks.memory.real`` against the real llama.cpp server: plumbing, not a score.

SmolLM2-135M writes poor summaries, so its recall is low and not asserted; the test
checks that the probe ran end to end: the model wrote the summaries, every reply
request was probed, and the checkpoints report what was sent. Skipped without the
server (``bash .ci/setup-llama``), failed under CI.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import openai

from benchmarks.harness.llama_server import N_CTX, llama_server
from benchmarks.memory.probing import ProbingBackend, WrittenSummary
from benchmarks.memory.questions import ANSWER_TOKENS, QUESTIONS
from benchmarks.memory.real import main, play, play_without_memory
from benchmarks.memory.retention import carries
from benchmarks.memory.script import FACTS, make_script
from memora.backends.base import drain
from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend
from memora.memory.backend import CHAT_SERVER_PROFILE, ReplyRequest, ServerProfile
from memora.text.messages import Message
from memora.text.prompts import SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter
from tests.support.fakes import ScriptedBackend


def test_the_retention_probe_runs_against_a_real_openai_compatible_server(tmp_path, capsys):
    out = tmp_path / "recall.json"
    with llama_server("chatml", tmp_path / "llama-server.log") as server:
        args = ["--base-url", server.url, "--model", "smollm2", "--seed", "3", "--turns", "6", "--every", "3", "--policy", "window"]
        args += ["--budget", "1500", "--recent-turns", "1", "--reply-tokens", "32", "--context-window", str(N_CTX), "--json", str(out)]
        assert main([*args, "--ask", "--rows", "--summaries", str(tmp_path / "summaries.json")]) == 0

    rows = json.loads(out.read_text(encoding="utf-8"))
    assert list(rows) == ["Memora, window policy", "full history (the ceiling)", "window only, no summary (the floor)"]
    # The model was asked each fact due at the checkpoints, in every row; its answers are not asserted (a 135M model).
    assert all(row[-1]["asked"] == rows["full history (the ceiling)"][-1]["asked"] > 0 for row in rows.values())
    assert rows["full history (the ceiling)"][-1]["so_far"] == 1 and rows["window only, no summary (the floor)"][-1]["so_far"] == 0
    checkpoints = rows["Memora, window policy"]
    assert [c["turn"] for c in checkpoints] == [3, 6]
    last = checkpoints[-1]
    # Facts were due (seed 3 states its first one at turn 1), and the model itself summarized (one recent turn).
    assert last["probed"] >= 1 and last["summaries"] >= 1
    assert 0 <= last["so_far"] <= 1
    assert abs(last["so_far"] + last["stale_so_far"] + last["missing_so_far"] - 1) < 1e-9
    # Memora always sends the user's current message.
    assert last["without_current"] == 0
    # The summaries the model wrote are saved, one per summary request, in turn order.
    written = json.loads((tmp_path / "summaries.json").read_text(encoding="utf-8"))["Memora, window policy"]
    assert len(written) == last["summaries"] and [w["turn"] for w in written] == sorted(w["turn"] for w in written)
    printed = capsys.readouterr().out
    assert "| 6 |" in printed and "smollm2" in printed and "answered correctly" in printed and "### full history" in printed


@dataclass
class TokenizingServer(ScriptedBackend):
    """A chat server that counts with its own tokenizer (``count_request``), twice o200k_base; records each count."""

    profile: ServerProfile = CHAT_SERVER_PROFILE
    exact_counts: list[int] = field(default_factory=list)

    def count_request(self, model, instructions, messages) -> int:
        counted = 2 * LocalTokenCounter().count(model, instructions, messages)
        self.exact_counts.append(counted)
        return counted

    def counting_source(self, model) -> str:
        return "the scripted server's tokenizer"


def test_the_summaries_the_model_wrote_are_kept_with_their_turn_and_cut():
    server = ScriptedBackend(summary_text=lambda request: f"summary of {len(request.new_messages)} messages", cut_summaries=True)
    written: list[WrittenSummary] = []
    play(server, "m", make_script(8, seed=3), [8], written=written, max_input_tokens=1500, max_recent_turns=1)
    assert server.summaries and len(written) == len(server.summaries)
    assert [w.text for w in written] == [f"summary of {len(r.new_messages)} messages" for r in server.summaries]
    assert all(w.cut for w in written) and all(1 <= w.turn <= 8 for w in written)


def test_the_probing_wrapper_shows_the_memory_the_servers_own_tokenizer():
    server = TokenizingServer()
    script = make_script(6, seed=3)
    play(server, "m", script, [6], max_input_tokens=1500, max_recent_turns=1)
    # The memory counted every request with the server's tokenizer, through the wrapper.
    assert len(server.exact_counts) >= script.turns
    wrapper = ProbingBackend(server, script)
    hello = (Message("user", "Hello"),)
    assert wrapper.count_request("m", "", hello) == server.count_request("m", "", hello) > 0
    assert wrapper.counting_source("m") == server.counting_source("m")
    assert (wrapper.label, wrapper.offline, wrapper.profile) == (server.label, server.offline, server.profile)


def test_two_learners_on_one_llama_cpp_python_server_do_not_cut_each_others_replies(tmp_path):
    # llama-cpp-python interrupts a streaming reply whenever another request waits for the model
    # (its default interrupt_requests): B's token count ended A's stream with no finish reason.
    with llama_server("chatml", tmp_path / "llama-server.log") as server:
        learner_a = ChatCompletionsBackend(openai.OpenAI(base_url=server.url, api_key=NO_KEY, max_retries=0, timeout=120))
        story = Message("user", "Tell me a long story about a cat who lives in Taipei, with many details.")
        request = ReplyRequest("smollm2", SYSTEM_PROMPT, (story,), max_output_tokens=256)
        with ThreadPoolExecutor(max_workers=1) as pool:
            stream = learner_a.stream_reply(request)
            first = next(stream)
            # Learner B's message counted by the server's tokenizer (what Memora's count does), while A's reply streams.
            counted = pool.submit(server.count, "How do I say 你好 politely?")
            time.sleep(0.2)
            reply = drain(itertools.chain([first], stream))
            assert counted.result(timeout=120) > 0
    # A's reply ran to its own end (its cap, or the model's stop) with a finish reason: before, it ended at B's
    # request without one, and the backend raised "the stream ended early".
    assert isinstance(first, str) and reply.text.startswith(first) and len(reply.text) > len(first)


def _recall_so_far(summary_text) -> float:
    server = ScriptedBackend(profile=CHAT_SERVER_PROFILE, summary_text=summary_text)
    (last,) = play(server, "m", make_script(24, seed=3), [24], max_input_tokens=3000, max_recent_turns=1, fold_policy="window")
    assert server.summaries and last.probed
    return last.so_far


def test_a_summary_that_copies_the_transcript_word_for_word_is_not_scored_as_remembering():
    def copy(request):
        return "\n".join(filter(None, [request.existing_summary, *(m.content for m in request.new_messages)]))

    def in_its_own_words(request):
        known = [request.existing_summary] if request.existing_summary else []
        for m in request.new_messages:
            for fact, values in FACTS.items():
                known += [f"{fact}: {value}" for value in values if m.role == "user" and carries(m.content, fact, value)]
        return "; ".join(known)

    # The window holds one pair; the facts due were stated 4 or more turns before: only the summary can carry them.
    assert _recall_so_far(copy) == 0
    assert _recall_so_far(in_its_own_words) > 0.5


def _answers_from_what_it_was_sent(request) -> str:
    """A fake model that reads its context: asked a probe question, it answers the value last sent for that fact."""
    fact = next((fact for fact, question in QUESTIONS.items() if request.messages[-1].content == question), None)
    if fact is None:
        return "Sure."
    context = "\n".join(m.content for m in request.messages[:-1])
    seen = [
        (m.start(), value)
        for value, spellings in FACTS[fact].items()
        for spelled in spellings
        for m in re.finditer(re.escape(spelled), context)
    ]
    return f"It is {max(seen)[1]}." if seen else "I don't know."


def test_the_probe_questions_score_what_the_model_answers_from_what_it_was_sent_between_ceiling_and_floor():
    server = ScriptedBackend(profile=CHAT_SERVER_PROFILE, reply_text=_answers_from_what_it_was_sent)
    script, checkpoints = make_script(24, seed=3), [12, 24]
    ceiling = play_without_memory(server, "m", script, checkpoints, None, ask_questions=True)
    floor = play_without_memory(server, "m", script, checkpoints, 1, ask_questions=True)
    memora = play(server, "m", script, checkpoints, True, max_input_tokens=3000, max_recent_turns=1, fold_policy="window")

    asked = ceiling[-1].asked
    assert asked > 0 and floor[-1].asked == memora[-1].asked == asked
    # Each question was its own request, with the turn's context and the question in place of the current message.
    questions = [r for r in server.replies if r.messages[-1].content in QUESTIONS.values()]
    assert len(questions) == 3 * asked and all(r.max_output_tokens == ANSWER_TOKENS for r in questions)
    assert ceiling[-1].answered_so_far == ceiling[-1].so_far == 1
    assert floor[-1].answered_so_far == floor[-1].so_far == 0
    # ScriptedBackend's summaries paste the messages (within the summary cap): (a) does not score the copies, but the
    # model answers from them what it can.
    assert floor[-1].answered_so_far < memora[-1].answered_so_far <= ceiling[-1].answered_so_far and memora[-1].so_far == 0
