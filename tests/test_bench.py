"""The benchmark's instruments: the article port, the recording backend, the figures. No timing asserted."""

from __future__ import annotations

import json
import re
import statistics
import time
import tomllib
from dataclasses import replace
from pathlib import Path

from benchmarks.memory.__main__ import main
from benchmarks.memory.article import ArticleMemory
from benchmarks.memory.peers import PEERS, LangchainMiddleware, LangmemSummarize, _fixed_tokens, _Peer
from benchmarks.memory.recording import SUMMARY_TOKEN_CAP, RecordingBackend, cut_summary, keep_newest_lines, recent_pairs
from benchmarks.memory.replays import Progress, Replay, Replayer, play
from benchmarks.memory.retention import Probed, Recall, carries, due_facts, has_current_message, probe
from benchmarks.memory.run import PAGE, RECOMMENDED, replay, strategies, token_figures
from benchmarks.memory.script import FACTS, Script, Statement, make_script
from benchmarks.memory.strategies import Limits
from benchmarks.memory.sweep import OURS, Point, best_knob, dominating, knob_grid, sweep
from memora.app.settings import Settings
from memora.backends.base import drain
from memora.memory.backend import ReplyRequest
from memora.memory.server import summary_request
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INSTRUCTIONS, SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter, count_text, truncate_text
from tests.support.fakes import ScriptedBackend


def article_turn(memory: ArticleMemory, backend, text: str) -> None:
    memory.add_user_message(text)
    stats = memory.prepare_context()
    messages = tuple(Message(m["role"], m["content"]) for m in stats["context_messages"])
    reply = drain(backend.stream_reply(ReplyRequest("m", SYSTEM_PROMPT, messages)))
    memory.finish_turn(reply.text, stats["context_messages"], reply.usage.total_tokens)


def test_article_port_counts_once_per_try_and_summarizes_once_per_folded_pair():
    backend = ScriptedBackend(summary_text=lambda request: "The user sent long texts.", count_remotely=True)
    long_text = "apple " * 120
    user, reply = Message("user", long_text), Message("assistant", "reply 1")
    # Three long messages fit with no summary, not beside one: the fourth turn must fold
    # its two oldest pairs, one summary request and one more count per pair.
    budget = LocalTokenCounter().count("m", SYSTEM_PROMPT, [user, reply, user]) + 150
    memory = ArticleMemory(backend, "m", SYSTEM_PROMPT, SUMMARY_INSTRUCTIONS, budget, 3)
    for _ in range(3):
        article_turn(memory, backend, long_text)
    counts_before, summaries_before = len(backend.counts), len(backend.summaries)

    article_turn(memory, backend, long_text)

    folded = len(backend.summaries) - summaries_before
    assert folded == 2
    assert all(len(s.new_messages) == 2 for s in backend.summaries[summaries_before:])
    assert len(backend.counts) - counts_before == folded + 1
    assert memory.summarized_message_count == 2 * folded


def test_recording_backend_reports_real_counts_of_what_it_was_sent_and_caps_summaries():
    backend = RecordingBackend(replies=("first reply", "second reply"))
    request = ReplyRequest("m", SYSTEM_PROMPT, (Message("user", "你好, can you help me?"),))
    completion = drain(backend.stream_reply(request))

    assert completion.text == "first reply"
    assert backend.calls[0].input_tokens == LocalTokenCounter().count("m", SYSTEM_PROMPT, request.messages)
    assert backend.calls[0].output_tokens == count_text("first reply")

    many = tuple(Message("user", f"My goal number {i} is to speak clearly at work.") for i in range(60))
    summary = backend.summarize(summary_request("m", SUMMARY_INSTRUCTIONS, "", many, 10_000))
    assert count_text(summary.text) <= SUMMARY_TOKEN_CAP
    assert [c.kind for c in backend.calls] == ["reply", "summary"]


def test_a_summary_over_its_cap_keeps_its_beginning_as_the_product_does_and_newest_lines_only_on_request():
    # Chinese lines hold few words and many tokens: the word limit keeps them all, the token cap cannot.
    lines = [f"- 我第 {n} 次說：我每天通勤的時候會聽英文 Podcast。" for n in range(12)] + ["- Actually I'm B2, not B1."]
    text = "\n".join(lines)
    kept = keep_newest_lines(text, 80)
    assert count_text(kept) <= 80 < count_text(text)
    assert kept.endswith(lines[-1]) and lines[0] not in kept
    assert text.endswith(kept)
    assert keep_newest_lines(text, 10_000) == text
    assert cut_summary(text, 80, "newest") == kept
    # The product's end: memora's summarizer bounds a summary with truncate_text, as a model stopped by its
    # max_output_tokens does.
    assert cut_summary(text, 80) == truncate_text(text, 80) != keep_newest_lines(text, 80)
    new = tuple(Message("user", line[2:]) for line in lines)
    request = summary_request("m", SUMMARY_INSTRUCTIONS, "", new, 10_000)
    summary = RecordingBackend(replies=("r",), summary_cap=80).summarize(request)
    assert count_text(summary.text) <= 80 and summary.text.startswith("- 我第 0 次說") and "B2" not in summary.text
    newest = RecordingBackend(replies=("r",), summary_cap=80, cut="newest").summarize(request)
    assert count_text(newest.text) <= 80 and newest.text.endswith("Actually I'm B2, not B1.")


def test_scripts_are_deterministic_mixed_and_prefix_stable():
    short, longer = make_script(20), make_script(60)
    assert short == make_script(20)
    assert longer.prefix(20) == short
    text = " ".join(longer.user_messages)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text) and "the" in text
    assert max(count_text(m) for m in longer.user_messages) > 250


def test_figures_come_from_the_recorded_requests():
    script = make_script(40)
    factories = strategies()
    figures = {}
    for name in ("full-history", "article-v0.7", "memora", "memora-watermark+prefold"):
        strategy, _ = replay(factories[name], script, Limits())
        figures[name] = token_figures(name, strategy.backend, script.turns, 1000, 3)

    assert figures["full-history"].over_budget > 0 and figures["full-history"].calls["summary"] == 0
    assert figures["article-v0.7"].calls["count"] >= script.turns
    assert figures["memora"].calls["count"] == 0 and figures["memora"].over_budget == 0
    assert figures["memora"].most_summaries_in_one_turn <= 1
    assert figures["memora-watermark+prefold"].summaries_after_reply > 0
    # Full history sends every previous pair, whole.
    assert figures["full-history"].mean_recent_pairs == statistics.fmean(range(script.turns))
    assert figures["full-history"].short_of_recent == 0


def test_recent_pairs_counts_whole_previous_pairs_in_order_before_the_current_message():
    said = [(Message("user", f"q{i}"), Message("assistant", f"a{i}")) for i in range(4)]
    history = [m for pair in said for m in pair]
    now = Message("user", "q4")
    summary = Message("developer", "summary of q0 and a0")

    assert recent_pairs([*history, now], said) == 4
    assert recent_pairs([summary, *history[2:], now], said) == 3
    assert recent_pairs([now], said) == 0 and recent_pairs([now], []) == 0
    # A cut reply ends the run: the pairs before it no longer count.
    cut = [*history[:5], Message("assistant", "a2 [cut]"), *history[6:], now]
    assert recent_pairs(cut, said) == 1
    # Out of order is not verbatim history.
    assert recent_pairs([*history[6:], *history[4:6], now], said) == 0


def test_recording_backend_records_the_recent_pairs_each_reply_request_sent():
    backend = RecordingBackend(replies=("r0", "r1", "r2"))
    first = (Message("user", "q0"),)
    drain(backend.stream_reply(ReplyRequest("m", SYSTEM_PROMPT, first)))
    drain(backend.stream_reply(ReplyRequest("m", SYSTEM_PROMPT, (*first, Message("assistant", "r0"), Message("user", "q1")))))
    drain(backend.stream_reply(ReplyRequest("m", SYSTEM_PROMPT, (Message("user", "q2"),))))

    assert [c.recent_pairs for c in backend.calls] == [0, 1, 0]
    assert backend.said[-1] == (Message("user", "q2"), Message("assistant", "r2"))


def test_main_writes_json_with_every_strategy(tmp_path, capsys, monkeypatch):
    import benchmarks.memory.__main__ as cli
    import benchmarks.memory.run as run_module

    real_run = run_module.run

    def small_run(**kwargs):
        kwargs.update(conversation_turns=(10,), history_turns=(2, 4), ttft_turns=3, repeats=1, budgets=(1000,))
        return real_run(**kwargs)

    monkeypatch.setattr(cli, "run", small_run)
    out = tmp_path / "bench.json"
    assert main(["--json", str(out), "--delay-ms", "1"]) == 0

    data = json.loads(out.read_text(encoding="utf-8"))
    names = [row["strategy"] for row in data["tokens"]["10"]]
    assert names == list(strategies())
    assert set(data["bookkeeping_us_per_turn"]["memora"]) == {"2", "4"}
    assert "| article-v0.7 |" in capsys.readouterr().out


def test_scripts_plant_and_correct_facts_in_both_languages_and_say_which():
    script = make_script(300, seed=11)
    stated = [(text, st) for text, sts in zip(script.user_messages, script.statements, strict=True) for st in sts]
    assert {st.fact for _, st in stated} == set(FACTS)
    assert any("not" in text and "Actually" in text for text, _ in stated)
    assert any(any(s in text for s in FACTS[st.fact][st.value][1:]) or "我" in text for text, st in stated)
    for text, st in stated:
        assert carries(text, st.fact, st.value)
    # A fact's spellings appear only in the messages that state it, and in no reply.
    unstated = [text for text, sts in zip(script.user_messages, script.statements, strict=True) if not sts] + list(script.replies)
    for fact, values in FACTS.items():
        for value in values:
            assert not any(carries(text, fact, value) for text in unstated), (fact, value)


def test_the_probe_counts_recalled_stale_and_missing_facts_last_stated_4_or_more_turns_before():
    said = ("My name is Amy. My level is B1.", "q", "Actually I'm B2, not B1.", "q", "q", "q", "q")
    statements = ((Statement("name", "Amy"), Statement("level", "B1")), (), (Statement("level", "B2"),), (), (), (), ())
    script = Script(1, said, ("r",) * 7, statements)
    due = due_facts(script)
    assert [len(d) for d in due] == [0, 0, 0, 0, 1, 1, 2]
    assert due[6][1] == Probed("level", "B2", ("B1",))
    summary = Message("developer", "- My name is Amy.\n- My level is B1.")
    assert probe([summary, Message("user", "q")], due[6]) == Recall(recalled=1, stale=1, missing=0)
    assert probe([Message("user", "q")], due[6]) == Recall(0, 0, 2)
    assert probe([Message("developer", "Amy, B2"), Message("user", "q")], due[6]) == Recall(2, 0, 0)
    # A fact the current message restates is not the memory's: only the copy the memory carried counts.
    restated = "My name is Amy, and I'm B2 now."
    assert probe([Message("user", restated)], due[6], restated) == Recall(0, 0, 2)
    assert probe([Message("developer", "- q\n- " + restated), Message("user", "q")], due[6], restated) == Recall(0, 0, 2)
    assert probe([Message("developer", "- My level is B2."), Message("user", restated)], due[6], restated) == Recall(1, 0, 1)
    # "Ben" is not in "Benefit": a Latin spelling must stand alone.
    assert not carries("Benefit", "name", "Ben") and carries("住在台南。", "city", "Tainan")
    assert has_current_message([summary, Message("user", "q")], "q")
    assert not has_current_message([Message("developer", "- q")], "q")


def test_the_recording_backend_does_not_credit_a_fact_the_current_message_restates():
    # Amy is stated at turn 1 and again at turn 6; the trimming memory below keeps only the current message.
    said = ("My name is Amy.", "q", "q", "q", "q", "Remember, my name is Amy.")
    statements = ((Statement("name", "Amy"),), (), (), (), (), (Statement("name", "Amy"),))
    script = Script(1, said, ("r",) * 6, statements)
    backend = RecordingBackend(replies=script.replies, script=script)
    for turn, text in enumerate(said, start=1):
        backend.turn = turn
        drain(backend.stream_reply(ReplyRequest("m", SYSTEM_PROMPT, (Message("user", text),))))
    recalls = [c.recall for c in backend.calls]
    assert recalls[-1] == Recall(recalled=0, stale=0, missing=1)


def test_the_recording_backend_probes_each_reply_request_of_a_script():
    script = make_script(30, seed=11)
    strategy, _ = replay(strategies()["memora"], script, Limits())
    replies = [c for c in strategy.backend.calls if c.kind == "reply"]
    due = due_facts(script)
    assert [c.recall.probed for c in replies] == [len(d) for d in due]
    assert all(c.has_current for c in replies)
    figures = token_figures("memora", strategy.backend, 30, 1000, 3)
    assert figures.facts_probed == sum(len(d) for d in due) and figures.without_current == 0
    assert 0 <= figures.retention <= 1


def test_a_peer_counts_against_memora_only_when_it_holds_and_is_both_cheaper_and_better():
    def at(strategy, usd, retention, over=(0, 0), without=(0, 0)):
        return Point(strategy, strategy, 1000, 200, None, (11, 12), 200, usd, retention, 0.0, 1 - retention, 0.3, over, without)

    page = at(PAGE, 0.05, 0.30)
    points = [
        page,
        at("cheaper-and-better", 0.04, 0.35),
        at("cheaper-only", 0.04, 0.25),
        at("over-budget", 0.03, 0.40, over=(0, 2)),
        at("drops-the-question", 0.03, 0.40, without=(1, 0)),
    ]
    assert [peer.strategy for _, peer in dominating(points, PAGE)] == ["cheaper-and-better"]
    assert page.holds and not points[3].holds and not points[4].holds


def test_a_peer_counts_only_against_memoras_point_at_the_same_cut_and_every_request_can_be_required():
    def at(strategy, usd, retention, cut="beginning", summary_over=(0, 0)):
        return Point(
            strategy, strategy, 1000, 200, None, (11, 12), 200, usd, retention, 0.0, 1 - retention, 0.3, (0, 0), (0, 0),
            summary_over_budget=summary_over, cut=cut,
        )  # fmt: skip

    points = [
        at(RECOMMENDED, 0.05, 0.30),
        at(RECOMMENDED, 0.05, 0.50, cut="newest"),
        at("better-under-beginning", 0.04, 0.35),
        at("better-under-newest", 0.04, 0.45, cut="newest"),
        at("summaries-over-budget", 0.04, 0.40, summary_over=(0, 3)),
    ]
    assert [peer.strategy for _, peer in dominating(points, RECOMMENDED)] == ["better-under-beginning", "summaries-over-budget"]
    assert [peer.strategy for _, peer in dominating(points, RECOMMENDED, every_request=True)] == ["better-under-beginning"]
    assert points[4].holds and not points[4].holds_every_request


def test_the_page_row_is_what_the_page_runs_the_article_window_with_prefold():
    page = strategies()[PAGE](RecordingBackend(replies=("r",)), Limits())
    assert page.memory.limits.fold_policy == Settings().fold_policy == "window" and page.prefold
    recommended = strategies()[RECOMMENDED](RecordingBackend(replies=("r",)), Limits())
    assert recommended.memory.limits.fold_policy == "watermark" and recommended.prefold
    assert PAGE in OURS and RECOMMENDED in OURS and "the page" in page.description
    assert "page" not in recommended.description
    assert "page" not in strategies()["memora"](RecordingBackend(replies=("r",)), Limits()).description


def test_summary_requests_over_the_budget_are_counted_for_every_memory():
    backend = RecordingBackend(replies=("r",))
    small = (Message("user", "My name is Amy."),)
    large = tuple(Message("user", f"My goal number {i} is to speak clearly at work.") for i in range(80))
    for messages in (small, large):
        backend.summarize(summary_request("m", SUMMARY_INSTRUCTIONS, "", messages, 200))
    figures = token_figures("x", backend, 1, 1000, 3)
    assert figures.largest_summary_input > 1000 and figures.summary_over_budget == 1
    # Memora sizes every summary request to the budget.
    strategy, _ = replay(strategies()[RECOMMENDED], make_script(60, seed=11), Limits())
    memora = token_figures(RECOMMENDED, strategy.backend, 60, 1000, 3)
    assert memora.calls["summary"] > 0 and memora.summary_over_budget == 0 and memora.largest_summary_input <= 1000


def test_the_knob_grid_spans_the_budget_on_both_sides_of_a_peers_default():
    limits = Limits(1000, 3)
    default = LangchainMiddleware.default_knob(limits)
    grid = knob_grid(default, limits)
    # The Middleware's default keep is about half the budget: the grid goes above and well below it.
    assert default in grid and grid == sorted(grid, reverse=True)
    assert max(grid) == 1000 - _fixed_tokens() and min(grid) <= 300
    assert len([k for k in grid if k < default]) >= 2 and len([k for k in grid if k > default]) >= 2


def test_the_best_knob_holds_first_then_retains_most_then_costs_least():
    def figures(over, retention, usd):
        return replace(token_figures("x", RecordingBackend(replies=("r",)), 1, 1000, 3), over_budget=over, recalled=int(retention * 100),
                       facts_probed=100, usd_per_100_turns={"total": usd})  # fmt: skip

    tried = [(900, figures(2, 0.9, 0.01)), (700, figures(0, 0.5, 0.05)), (500, figures(0, 0.5, 0.04)), (300, figures(0, 0.3, 0.01))]
    assert best_knob(tried) == 500
    assert best_knob([(900, figures(3, 0.9, 0.01)), (700, figures(1, 0.1, 0.09))]) == 700


def test_the_replayer_plays_each_distinct_replay_once_and_two_workers_agree_with_one():
    jobs = [
        Replay(name, None, 1000, 3, cap, cut, 11, 16)
        for name in (PAGE, "full-history")
        for cap, cut in ((100, "beginning"), (200, "newest"))
    ]
    said: list[str] = []
    serial = Replayer(Progress(3, said.append)).run(jobs + jobs[:1])
    # full-history never summarizes: its two caps are one replay; the repeated job is not played again.
    assert len(said) == 3 and serial[4] == serial[0] and serial[2] == serial[3]
    assert all(re.search(r"replay \d/3, .*: \d+\.\d s; .* so far, about \d+ s left$", line) for line in said)
    parallel = Replayer(Progress(3, lambda line: None), workers=2).run(jobs)
    assert parallel == serial[:4]
    assert serial[0] == play(jobs[0])[0]


def test_progress_estimates_the_time_left_from_the_replays_done():
    said: list[str] = []
    progress = Progress(total=4, say=said.append, began=time.perf_counter() - 10.0)
    progress.step(Replay(PAGE, None, 1000, 3, 200, "beginning", 11, 200), 10.0)
    # 10 s for 1 of 4: about 30 s left.
    assert said[0].startswith("replay 1/4, memora+prefold, budget 1,000, cap 200, cut beginning, seed 11: 10.0 s; 10 s so far")
    assert said[0].endswith("about 30 s left")


class KeepLastTokens(_Peer):
    """A test peer: sends its summary and the last ``knob`` tokens of messages; summarizes the user's older messages."""

    label = "keeps its last tokens (test fake)"
    knob_name = "keep"

    def __init__(self, backend, limits, knob=None):
        super().__init__(backend, limits, knob)
        self.messages: list[Message] = []
        self.summarized = 0

    def play_turn(self, user_text: str) -> float:
        began = time.perf_counter()
        self.recorder.user_said(user_text)
        self.messages.append(Message("user", user_text))
        kept: list[Message] = []
        for message in reversed(self.messages):
            if sum(count_text(m.content) for m in (message, *kept)) > self.knob:
                break
            kept.insert(0, message)
        dropped = self.messages[: len(self.messages) - len(kept)]
        if len(dropped) > self.summarized:
            self.recorder.summarize(dropped[self.summarized :])
            self.summarized = len(dropped)
        summary = [Message("developer", self.recorder.summary)] if self.recorder.summary else []
        text, first = self._reply([*summary, *(kept or self.messages[-1:])], began)
        self.messages.append(Message("assistant", text))
        return first


def test_the_sweep_tunes_each_peer_at_each_cap_and_cut_rule_on_the_tuning_seed(monkeypatch):
    monkeypatch.setitem(PEERS, "keep-last", ("fake", KeepLastTokens))
    said: list[str] = []
    points = sweep([600], ["keep-last"], caps=(40, 300), seeds=(11,), turns=24, workers=1, progress=said.append)

    limits = Limits(600, 3)
    grid = knob_grid(KeepLastTokens.default_knob(limits), limits)
    for cap, cut in ((40, "beginning"), (300, "beginning"), (40, "newest")):
        assert any(f"cap {cap}, cut {cut}: keep-last tuned on seed 7" in line for line in said)
    for cap, cut in ((40, "beginning"), (300, "beginning")):
        tried = [(knob, play(Replay("keep-last", knob, 600, 3, cap, cut, 7, 24))[0]) for knob in grid]
        (peer,) = [p for p in points if p.strategy == "keep-last" and p.cap == cap and p.cut == cut]
        assert peer.knob == best_knob(tried)
    assert {(p.strategy, p.cap, p.cut) for p in points} >= {(PAGE, 40, "beginning"), (RECOMMENDED, 300, "beginning")}
    # The sensitivity row: the other cut rule, at the largest cap up to the default.
    assert {(p.cap, p.cut) for p in points} == {(40, "beginning"), (300, "beginning"), (40, "newest")}


def test_no_bench_figure_is_hand_copied_into_the_page_catalogs_or_the_settings_table():
    # A figure the bench measured (a ratio, a share of facts, a $ cost) goes stale the day the bench changes.
    root = Path(__file__).resolve().parent.parent
    figure = re.compile(r"\d+(?:\.\d+)?\s*[x×]|\b0\.\d\d\b|\$\d")
    for catalog in ("en.toml", "zh-TW.toml"):
        strings = tomllib.loads((root / "memora" / "app" / "page" / "locales" / catalog).read_text(encoding="utf-8"))
        policy = {key: text for key, text in strings.items() if key.startswith("policy.")}
        assert policy and not {key: text for key, text in policy.items() if figure.search(text)}, catalog
    table = (root / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines()
    (row,) = [line for line in table if line.startswith("| `MEMORA_FOLD_POLICY`")]
    assert not figure.search(row), row


class KeepMoreThanTheCap(KeepLastTokens):
    """As ``KeepLastTokens``, but, as langmem refuses a knob not above the summary cap, refuses one not above 4 caps."""

    @staticmethod
    def accepts(knob: int, cap: int) -> bool:
        return knob > 4 * cap


def test_the_sweep_tunes_only_knobs_a_library_accepts_and_leaves_out_a_cap_it_accepts_none_at(monkeypatch):
    monkeypatch.setitem(PEERS, "keep-more", ("fake", KeepMoreThanTheCap))
    assert not LangmemSummarize.accepts(235, 300) and LangmemSummarize.accepts(335, 300)
    said: list[str] = []
    points = sweep([600], ["keep-more"], caps=(100, 200), seeds=(11,), turns=12, workers=1, sensitivity=False, progress=said.append)
    tried = [line for line in said if line.startswith("replay") and "keep-more" in line and "seed 7" in line]
    assert tried and all(int(re.search(r"knob (\d+)", line)[1]) > 400 for line in tried)
    # Its largest knob, 600 less the system prompt, is not above 4 x 200: no point at cap 200.
    assert {p.cap for p in points if p.strategy == "keep-more"} == {100}
    assert {p.cap for p in points if p.strategy == PAGE} == {100, 200}
