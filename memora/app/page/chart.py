"""The token-usage chart: its data and its Vega-Lite spec; pure, no Streamlit.

Bars per turn (reply input, reply output, summary requests, stacked) show what
was spent; two lines show the input budget and what sending the full history
would have cost. The gap between the lines is the point of the demo. A replay of
the other fold policy (``memora.teaching.replay``) adds its own line, so a student
sees what that policy would have spent on the same turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from memora.app.page.frames import replay_per_turn, usage_per_turn
from memora.app.page.i18n import t
from memora.teaching.replay import Replay
from memora.text.usage import UsageRecord

BAR_SERIES = ("reply_input", "reply_output", "summary")
LINE_SERIES = ("full_history", "budget")
COLUMNS = ["turn", "series", "tokens", "mark"]


MAX_POINTS = 100
"""Turns the chart draws at most; a longer conversation's turns are averaged in groups
(``usage_chart``)."""


@dataclass(frozen=True)
class UsageChart:
    """The chart's rows (``usage_chart_frame``) and how many turns each point averages (1: one point
    a turn)."""

    frame: pd.DataFrame
    turns_per_point: int


def usage_chart(
    records: Sequence[UsageRecord],
    max_input_tokens: int,
    lang: str,
    replays: Sequence[Replay] = (),
    max_points: int = MAX_POINTS,
) -> UsageChart:
    """``usage_chart_frame`` with at most ``max_points`` turns: past that, turns are averaged
    ``turns_per_point`` at a time, the fewest that fit, so a conversation of 2,000 turns sends a
    chart of 100 points, not 12,000 rows."""
    turns = max((record.turn for record in records), default=0)
    per_point = max(1, -(-turns // max_points))
    return UsageChart(
        usage_chart_frame(records, max_input_tokens, lang, replays, turns_per_point=per_point),
        per_point,
    )


def usage_chart_frame(
    records: Iterable[UsageRecord],
    max_input_tokens: int,
    lang: str,
    replays: Sequence[Replay] = (),
    *,
    turns_per_point: int = 1,
) -> pd.DataFrame:
    """Long-format rows ``turn, series, tokens, mark`` (mark is ``bar`` or ``line``).

    Series names are translated into ``lang``. The budget line uses the current ``max_input_tokens``
    for every turn, since the ledger does not keep past budgets. Turns whose reply failed keep their
    summary spend and show 0 for the reply and the full-history line. Each of ``replays`` adds a
    line (``frames.replay_per_turn``: what that strategy would have spent on the turn, the reply's
    real output included, so the line compares with the bar's height); a turn the replay has not
    reached (a reply in progress) has no point on it. With ``turns_per_point`` above 1, each point
    is the mean of that many consecutive turns (a replay's mean over the turns it reached), at the
    group's first turn. No records give an empty frame with the columns.
    """
    per_turn = usage_per_turn(records)
    if per_turn.empty:
        return pd.DataFrame(columns=COLUMNS)
    wide = per_turn.assign(budget=max_input_tokens)
    replay_names = {f"replay_{run.strategy}": replay_series(lang, run.strategy) for run in replays}
    for run in replays:
        wide[f"replay_{run.strategy}"] = replay_per_turn(run, per_turn["reply_output"])
    if turns_per_point > 1:
        groups = (wide.index - 1) // turns_per_point
        wide = wide.groupby(groups).mean().round()
        wide.index = wide.index * turns_per_point + 1
        wide.index.name = "turn"
    series = [*BAR_SERIES, *LINE_SERIES, *replay_names]
    # One vectorised melt: a Python loop over turns made long conversations slow to redraw.
    long = (
        wide.reset_index()
        .melt(id_vars="turn", value_vars=series, var_name="series", value_name="tokens")
        .dropna()
    )
    long["mark"] = long["series"].map({s: "bar" if s in BAR_SERIES else "line" for s in series})
    long["series"] = long["series"].map(
        {**{s: t(lang, f"chart.{s}") for s in (*BAR_SERIES, *LINE_SERIES)}, **replay_names}
    )
    return long.astype({"turn": "int64", "tokens": "int64"})[COLUMNS].reset_index(drop=True)


def replay_series(lang: str, strategy: str) -> str:
    """The chart's name for a replay's line."""
    return t(lang, "whatif.chart_line", strategy=t(lang, f"whatif.{strategy}"))


REPLAY_COLOURS = ("#B279A2", "#72B7B2", "#FF9DA6")


def usage_chart_spec(lang: str, replays: Sequence[str] = ()) -> dict[str, Any]:
    """A layered Vega-Lite spec for ``usage_chart_frame``'s rows: stacked bars plus two lines, and
    one line per strategy in ``replays`` (``Replay.strategy``), dashed: an estimate, not a bill."""
    series = [t(lang, f"chart.{s}") for s in (*BAR_SERIES, *LINE_SERIES)] + [
        replay_series(lang, s) for s in replays
    ]
    x = {
        "field": "turn",
        "type": "ordinal",
        "title": t(lang, "chart.turn"),
        "axis": {"labelAngle": 0},
    }
    y = {"field": "tokens", "type": "quantitative", "title": t(lang, "chart.tokens")}
    color = {
        "field": "series",
        "type": "nominal",
        "title": t(lang, "chart.series"),
        "scale": {
            "domain": series,
            "range": [
                "#4C78A8",
                "#9ECAE9",
                "#F58518",
                "#E45756",
                "#54A24B",
                *REPLAY_COLOURS[: len(replays)],
            ],
        },
        "legend": {"orient": "bottom", "columns": 2, "labelLimit": 0},
    }
    tooltip = [
        {"field": "turn", "title": t(lang, "chart.turn")},
        {"field": "series"},
        {"field": "tokens"},
    ]
    # Replays are dashed: what a strategy would have spent, not what was billed.
    estimates = series[len(BAR_SERIES) + len(LINE_SERIES) :]
    dashed = {
        "strokeDash": {
            "condition": {"test": {"field": "series", "oneOf": estimates}, "value": [6, 3]},
            "value": [1, 0],
        }
    }
    dashed = dashed if estimates else {}
    return {
        "layer": [
            {
                "transform": [{"filter": {"field": "mark", "equal": "bar"}}],
                "mark": {"type": "bar"},
                "encoding": {
                    "x": x,
                    "y": {**y, "stack": "zero"},
                    "color": color,
                    "tooltip": tooltip,
                },
            },
            {
                "transform": [{"filter": {"field": "mark", "equal": "line"}}],
                "mark": {"type": "line", "point": True},
                "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip, **dashed},
            },
        ],
    }
