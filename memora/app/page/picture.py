"""One picture of a request against the budget: instructions | summary | recent window | current
message | free room.

Pure, no Streamlit: each bar is a ``Picture`` read off one record, never rebuilt: a request's parts
as the memory kept them when it checked it (``RequestParts``, on the request's ledger record: the
last request and every turn box), or the parts of the memory's plan of the next request
(``ShortTermMemory.plan()`` with no text: what the fold ahead plans for). ``picture_spec`` draws
them as one horizontal stacked bar each, the budget marked, each part's tokens on hover;
``picture_caption`` says the same in words, for a reader who cannot hover (a phone) or cannot see
the colours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memora.app.page.i18n import t
from memora.memory import ShortTermMemory
from memora.memory.plan import TurnPlan
from memora.text.usage import RequestParts

PARTS = ("instructions", "summary", "window", "current", "free")
"""The parts of a request, in the order it sends them, then the room it leaves."""
COLOURS = ("#A3A8B8", "#FFA421", "#1C83E1", "#21C354", "#EEEEEE")
"""Streamlit's gray, orange, blue and green, so that the caption's coloured words (``MARKS``) are
the legend."""
MARKS = ("gray", "orange", "blue", "green")
"""Streamlit's Markdown colour of each part's words in the caption (``:orange[summary 55]``); free
room has none."""


@dataclass(frozen=True)
class Picture:
    """One request's tokens by part, against ``budget``. ``instructions`` counts the request's
    framing and the reply's priming with them; ``free`` is what the budget had left (0 when the
    request passed it: ``over`` says by how much). ``row`` names the bar ("sent", "next" or a turn's
    "turn")."""

    row: str
    instructions: int
    summary: int
    window: int
    current: int
    budget: int

    @property
    def used(self) -> int:
        return self.instructions + self.summary + self.window + self.current

    @property
    def free(self) -> int:
        return max(0, self.budget - self.used)

    @property
    def over(self) -> int:
        return max(0, self.used - self.budget)

    def tokens(self, part: str) -> int:
        return getattr(self, part)


def request_picture(parts: RequestParts, row: str = "sent") -> Picture:
    """A request as its record keeps it (``RequestParts``, made when the memory checked it): each
    part's tokens and the budget it was checked against, read, not rebuilt. A server that keeps one
    system message carries the summary inside it: the summary's share of that message counts as
    summary, the rest as instructions."""
    return Picture(
        row,
        parts.instructions,
        parts.summary,
        parts.window_tokens,
        parts.current_tokens,
        parts.budget,
    )


def next_picture(plan: TurnPlan) -> Picture:
    """The next request as ``plan`` (the fold ahead's) planned it, part by part: the instructions,
    the summary (reserved at full length when it folds), what stays in the recent window, and the
    message it plans for."""
    return Picture("next", plan.fixed, plan.summary, plan.window, plan.message, plan.budget)


def next_plan(memory: ShortTermMemory) -> TurnPlan | None:
    """``memory.plan()``: what the next message will fold, and its request's size; None while a
    reply is on its way, before the first message, or when even the smallest next request cannot fit
    (the page says why elsewhere)."""
    if not memory.conversation.messages or memory.conversation.pending:
        return None
    try:
        return memory.plan()
    except ValueError:  # ContextBudgetError is one; plan() with no text checks no session cap
        return None


def picture_rows(pictures: Sequence[Picture], lang: str) -> list[dict[str, Any]]:
    """One row per part each picture draws: the bar's name, the part's name, its tokens, where it
    starts and ends. A part of 0 tokens draws nothing and has no row. Plain rows, inlined in the
    spec: a DataFrame's Arrow encoding cost each turn box several milliseconds a run, and every byte
    is sent again by every run that draws the box."""
    rows = []
    for picture in pictures:
        bar = t(lang, f"picture.row_{picture.row}")
        start = 0
        for part in PARTS:
            tokens = picture.tokens(part)
            if tokens:
                rows.append(
                    {
                        "bar": bar,
                        "part": t(lang, f"picture.{part}"),
                        "tokens": tokens,
                        "start": start,
                        "end": start + tokens,
                    }
                )
            start += tokens
    return rows


def budget_rows(pictures: Sequence[Picture], lang: str) -> list[dict[str, Any]]:
    """One row per picture: the bar's name and its budget, where the tick is drawn."""
    return [
        {"bar": t(lang, f"picture.row_{picture.row}"), "budget": picture.budget}
        for picture in pictures
    ]


def picture_spec(pictures: Sequence[Picture], lang: str) -> dict[str, Any]:
    """A Vega-Lite spec of ``pictures``, their rows inlined (``picture_rows``, ``budget_rows``): one
    horizontal stacked bar each, parts in the request's order, and the budget as a black tick across
    each bar. Hovering a part shows its name and tokens."""
    parts = [t(lang, f"picture.{part}") for part in PARTS]
    y = {"field": "bar", "type": "nominal", "title": None, "sort": None, "axis": {"labelLimit": 90}}
    tooltip = [
        {"field": "bar", "title": " "},
        {"field": "part", "title": " "},
        {"field": "tokens", "title": t(lang, "picture.tokens")},
    ]
    return {
        "data": {"values": picture_rows(pictures, lang)},
        "height": {"step": 26},
        "layer": [
            {
                "mark": {"type": "bar", "stroke": "#FFFFFF", "strokeWidth": 0.5},
                "encoding": {
                    "y": y,
                    "x": {
                        "field": "start",
                        "type": "quantitative",
                        "title": t(lang, "picture.tokens"),
                    },
                    "x2": {"field": "end"},
                    "color": {
                        "field": "part",
                        "type": "nominal",
                        "title": None,
                        "scale": {"domain": parts, "range": list(COLOURS)},
                        # The caption under the chart is the legend, its words in the parts'
                        # colours: a chart's own legend was cut at a phone's width ("current mes").
                        "legend": None,
                    },
                    "tooltip": tooltip,
                },
            },
            {
                "data": {"values": budget_rows(pictures, lang)},
                "mark": {"type": "tick", "color": "#000000", "thickness": 2},
                "encoding": {"y": y, "x": {"field": "budget", "type": "quantitative"}},
            },
        ],
    }


def picture_caption(picture: Picture, lang: str) -> str:
    """The picture in words, and its legend: each part's tokens in its colour, then what was used of
    the budget and what was left (or passed)."""
    parts = " · ".join(
        f":{mark}[{t(lang, f'picture.{part}')} {picture.tokens(part):,}]"
        for part, mark in zip(PARTS, MARKS, strict=False)
    )
    figures = {
        "used": f"{picture.used:,}",
        "budget": f"{picture.budget:,}",
        "free": f"{picture.free:,}",
        "over": f"{picture.over:,}",
    }
    return parts + " · " + t(lang, "picture.over" if picture.over else "picture.used", **figures)


def picture_key(lang: str) -> str:
    """The colour key in words on the parts' own colours, readable without hovering (a phone) and
    not in grey."""
    parts = " · ".join(
        f":{mark}[■] {t(lang, f'picture.{part}')}" for part, mark in zip(PARTS, MARKS, strict=False)
    )
    return parts + " · " + t(lang, "picture.key_rest")


def plan_caption(memory: ShortTermMemory, plan: TurnPlan, lang: str) -> str:
    """What the next message will fold first and why (the plan's reason), and then what it will
    send, in a sentence a student reads: the summary and the messages that stay word for word, by
    the chat's numbers."""
    folded = memory.conversation.folded
    finished = memory.conversation.finished
    kept = _kept_words(
        lang, summary=bool(plan.summary), first=folded + plan.fold + 1, last=finished
    )
    if not plan.fold:
        return t(lang, "picture.next_none", kept=kept)
    reason = ""
    if plan.reason != "none":
        reason = t(
            lang,
            f"fold.because_{plan.reason}",
            turns=memory.max_recent_turns,
            budget=f"{plan.budget:,}",
        )
    return t(
        lang,
        "picture.next_folds",
        first=folded + 1,
        last=folded + plan.fold,
        because=reason,
        kept=kept,
    )


def _kept_words(lang: str, *, summary: bool, first: int, last: int) -> str:
    """What a request carries before the user's message: the summary, the messages
    ``first``–``last`` word for word."""
    window = last >= first
    if summary and window:
        return t(lang, "picture.kept_summary_window", first=first, last=last)
    if summary:
        return t(lang, "picture.kept_summary")
    if window:
        return t(lang, "picture.kept_window", first=first, last=last)
    return t(lang, "picture.kept_nothing")
