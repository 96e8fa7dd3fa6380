"""The page's pure pieces: commands, message marks, the stats table and the usage chart's data."""

from __future__ import annotations

import pandas as pd
import pytest

from memora.app.page.chart import usage_chart, usage_chart_frame, usage_chart_spec
from memora.app.page.frames import replay_per_turn
from memora.app.page.pager import Page, page_of
from memora.app.page.views import history_frame, message_marks, parse_command, run_command, what_if_frame
from memora.backends.offline import OfflineBackend
from memora.memory import ShortTermMemory
from memora.teaching.prices import ModelPrice
from memora.teaching.replay import Replay, ReplayedRequest
from memora.teaching.what_if import WhatIf, ledger_column, replay_column
from memora.text.usage import UsageRecord
from tests.support.memory import chat


def test_parse_command_splits_name_and_arguments():
    assert parse_command("/history") == ("history", "")
    assert parse_command("  /Status  foo bar ") == ("status", "foo bar")
    assert parse_command("/") == ("", "")
    assert parse_command("history") is None
    assert parse_command("What does /history do?") is None


def test_message_marks_follow_the_pointer_and_the_pending_turn(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "one", "two", "three")
    # Turn 3 folded #1-#2 before its request, which sent #3-#4 word for word and #5 as its message.
    assert message_marks(memory) == ["summarized", "summarized", "window", "window", "current", "window"]
    memory.prefold()  # folds #3-#4 for turn 4: sent in turn 3, folded since
    assert message_marks(memory) == ["summarized", "summarized", "folded_since", "folded_since", "current", "window"]
    memory.add_user_message("four")
    assert message_marks(memory)[-1] == "current" and message_marks(memory)[4] == "window"
    frame = history_frame(memory, "en")
    assert list(frame.columns) == ["#", "Role", "State", "Tokens", "Content"]
    assert list(frame["State"])[-1] == "current" and frame["Tokens"].gt(0).all()


def test_marks_follow_the_copy_the_page_draws_while_a_reply_job_appends(backend):
    """The page copies the history once per drawing; a job appending the next user message meanwhile changes no mark of that copy."""
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "one", "two", "three")
    drawn = list(memory.history)
    memory.add_user_message("four")  # the reply job's turn begins after the copy
    assert message_marks(memory, drawn) == ["summarized", "summarized", "window", "window", "current", "window"]
    assert message_marks(memory) == ["summarized", "summarized", "window", "window", "window", "window", "current"]


def test_commands_reject_arguments_and_unknown_names(backend):
    memory = ShortTermMemory(backend)
    assert run_command(memory, "history", "", "en").body == "(empty)"
    odd = run_command(memory, "status", "foo", "en")
    assert odd.error and odd.body == "The command /status takes no arguments (got: foo)."
    unknown = run_command(memory, "", "", "en")
    assert unknown.error and unknown.body.startswith("Unknown command /.")
    assert backend.replies == [] and backend.summaries == []


def record(turn: int, kind: str, input_tokens: int, output_tokens: int, full: int | None = None) -> UsageRecord:
    return UsageRecord(
        turn, kind, "m", input_tokens, input_tokens, output_tokens, input_tokens + output_tokens, 0.1, full_history_tokens=full
    )


def test_usage_chart_frame_has_bars_and_the_two_lines_per_turn():
    records = [record(1, "reply", 100, 20, 120), record(2, "summary", 80, 30), record(2, "reply", 150, 25, 260)]
    frame = usage_chart_frame(records, 1000, "en")
    wide = frame.pivot(index="turn", columns="series", values="tokens")
    assert list(wide.index) == [1, 2]
    assert wide.loc[2].to_dict() == {
        "Reply input": 150,
        "Reply output": 25,
        "Summaries": 110,
        "Full history": 260,
        "Budget": 1000,
    }
    assert set(frame[frame.mark == "line"].series) == {"Full history", "Budget"}
    assert wide.loc[1, "Summaries"] == 0


def test_usage_chart_frame_is_empty_without_records_and_translates_series():
    empty = usage_chart_frame([], 1000, "en")
    assert empty.empty and list(empty.columns) == ["turn", "series", "tokens", "mark"]
    frame = usage_chart_frame([record(1, "reply", 10, 5, 15)], 500, "zh-TW")
    assert "預算" in set(frame.series)


def test_usage_chart_spec_colours_every_series_the_frame_holds():
    memory = ShortTermMemory(OfflineBackend(), max_recent_turns=1)
    chat(memory, "My English level is B1.", "I like trains.", "Plan please.")
    frame = usage_chart_frame(memory.ledger, memory.max_input_tokens, "en")
    spec = usage_chart_spec("en")
    domain = spec["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert set(frame.series) == set(domain)
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["bar", "line"]
    assert isinstance(frame, pd.DataFrame) and frame.tokens.ge(0).all()
    budget = frame[frame.series == "Budget"].tokens
    assert (budget == memory.max_input_tokens).all()


WATERMARK = Replay(
    "watermark",
    2,
    (ReplayedRequest(1, "reply", 100), ReplayedRequest(2, "summary", 50, 10, (0, 2), True), ReplayedRequest(2, "reply", 90)),
)


def test_a_replay_line_is_its_turns_input_and_summaries_plus_the_real_reply_output():
    records = [record(1, "reply", 100, 20, 120), record(2, "summary", 80, 30), record(2, "reply", 150, 25, 260)]
    frame = usage_chart_frame(records, 1000, "en", [WATERMARK])
    line = frame[frame.series == "Watermark (estimate)"]
    assert list(line.turn) == [1, 2] and list(line.tokens) == [100 + 20, 50 + 10 + 90 + 25]
    assert set(line.mark) == {"line"}
    spec = usage_chart_spec("en", ["watermark"])
    assert set(frame.series) == set(spec["layer"][0]["encoding"]["color"]["scale"]["domain"])
    dashed = spec["layer"][1]["encoding"]["strokeDash"]["condition"]["test"]["oneOf"]
    assert dashed == ["Watermark (estimate)"]
    assert "strokeDash" not in usage_chart_spec("en")["layer"][1]["encoding"]


def test_a_turn_the_replay_has_not_reached_has_no_point_on_its_line():
    """A reply in progress: the ledger has its turn's fold, the replay only the finished turns."""
    per_turn = replay_per_turn(Replay("window", 1, (ReplayedRequest(1, "reply", 40),)), pd.Series([5, 0], index=[1, 2]))
    assert per_turn.iloc[0] == 45 and pd.isna(per_turn.iloc[1])
    records = [record(1, "reply", 40, 5, 45), record(2, "summary", 60, 10)]
    frame = usage_chart_frame(records, 1000, "en", [Replay("window", 1, (ReplayedRequest(1, "reply", 40),))])
    assert list(frame[frame.series == "Window (estimate)"].turn) == [1]


def test_the_what_if_table_puts_the_strategies_side_by_side_as_columns_and_the_ledgers_words_as_rows():
    full = Replay("full_history", 2, (ReplayedRequest(1, "reply", 100), ReplayedRequest(2, "reply", 1_250, fits=False)))
    ledger = [record(1, "reply", 100, 20), record(2, "summary", 60, 12), record(2, "reply", 120, 25)]
    price = ModelPrice("gpt-5-mini", input=0.25, cached_input=0.025, output=2.0)
    columns = (ledger_column("window", ledger, 2), replay_column(WATERMARK), replay_column(full, price))
    comparison = WhatIf(2, columns, (WATERMARK, full), "gpt-5-mini", 60)
    table = what_if_frame(comparison, "en")
    assert list(table.columns) == ["Window (yours: the ledger)", "Watermark (estimate)", "Full history"]
    assert table.index.name == "Figure"
    assert list(table.index) == [
        "Reply requests",
        "Summary requests",
        "Counted input, replies",
        "Counted input, summaries",
        "Summary output",
        "Total tokens",
        "Replies over budget",
        "$",
    ]
    assert list(table["Window (yours: the ledger)"]) == ["2", "1", "220", "60", "12", "292", "0", "tokens only"]
    assert list(table["Watermark (estimate)"]) == ["2", "1", "190", "50", "10", "250", "0", "tokens only"]
    assert list(table["Full history"]) == ["2", "0", "1,350", "0", "0", "1,350", "1", "$0.000338"]


def test_pages_are_cut_from_the_newest_end_and_reach_every_item():
    pages = [page_of(45, 20, number) for number in (1, 2, 3)]
    assert pages == [Page(1, 3, 25, 45, 45), Page(2, 3, 5, 25, 45), Page(3, 3, 0, 5, 45)]
    covered = sorted(i for page in pages for i in range(page.start, page.stop))
    assert covered == list(range(45))
    assert pages[0].has_older and not pages[0].has_newer
    assert pages[2].has_newer and not pages[2].has_older


def test_a_page_number_past_either_end_is_clamped_and_nothing_is_one_empty_page():
    assert page_of(45, 20, 9) == page_of(45, 20, 3)
    assert page_of(45, 20, 0) == page_of(45, 20, 1)
    assert page_of(0, 20, 1) == Page(1, 1, 0, 0, 0)
    with pytest.raises(ValueError, match="positive size"):
        page_of(10, 0, 1)


def test_a_page_of_the_history_frame_numbers_its_rows_as_in_the_whole_history(backend):
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "one", "two", "three")
    page = history_frame(memory, "en", 2, 4)
    assert list(page["#"]) == [3, 4]
    assert list(page["Content"]) == ["two", memory.history[3].content]
    assert list(page["Tokens"]) == list(history_frame(memory, "en")["Tokens"][2:4])


def test_a_long_conversation_s_chart_averages_its_turns_into_at_most_max_points():
    records = [record(turn, "reply", 100 + turn, 10, 200 + 10 * turn) for turn in range(1, 251)]
    chart = usage_chart(records, 1000, "en", max_points=100)
    assert chart.turns_per_point == 3
    wide = chart.frame.pivot(index="turn", columns="series", values="tokens")
    assert list(wide.index) == list(range(1, 251, 3))  # 84 points, each at its group's first turn
    assert wide.loc[1, "Reply input"] == 102  # the mean of turns 1-3: 101, 102, 103
    assert wide.loc[250, "Full history"] == 2700  # the last group holds turn 250 alone
    assert set(wide.loc[:, "Budget"]) == {1000}
    short = usage_chart(records[:100], 1000, "en", max_points=100)
    assert short.turns_per_point == 1 and len(short.frame) == len(usage_chart_frame(records[:100], 1000, "en"))
