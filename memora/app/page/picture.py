"""One picture of a request against the budget: instructions | summary | recent window | current message | free room.

Pure, no Streamlit: each bar is a ``Picture`` built from the request itself (the memory's last ``PreparedContext``),
from a finished turn's ledger record (for the turn boxes of earlier replies), or from the memory's plan of the next
request (``ShortTermMemory.plan()`` with no text: what the fold ahead plans for). ``picture_spec`` draws them as one
horizontal stacked bar each, the budget marked, each part's tokens on hover; ``picture_caption`` says the same in
words, for a reader who cannot hover (a phone) or cannot see the colours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memora.app.page.i18n import t
from memora.memory import ShortTermMemory
from memora.memory.core import local_budget, request_sizes
from memora.memory.plan import TurnPlan
from memora.memory.values import PreparedContext
from memora.teaching.story import Story
from memora.text.usage import UsageRecord

PARTS = ("instructions", "summary", "window", "current", "free")
"""The parts of a request, in the order it sends them, then the room it leaves."""
COLOURS = ("#A3A8B8", "#FFA421", "#1C83E1", "#21C354", "#EEEEEE")
"""Streamlit's gray, orange, blue and green, so that the caption's coloured words (``MARKS``) are the legend."""
MARKS = ("gray", "orange", "blue", "green")
"""Streamlit's Markdown colour of each part's words in the caption (``:orange[summary 55]``); free room has none."""


@dataclass(frozen=True)
class Picture:
    """One request's tokens by part, against ``budget``. ``instructions`` counts the request's framing and the reply's
    priming with them; ``free`` is what the budget had left (0 when the request passed it: ``over`` says by how much).
    ``row`` names the bar ("sent", "next" or a turn's "turn")."""

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


def sent_picture(prepared: PreparedContext, budget: int, row: str = "sent") -> Picture:
    """The request ``prepared`` sent, part by part, from its own messages' sources and tokens.

    A server that keeps one system message gets the instructions and the summary in one (``instructions_summary``):
    that message counts as summary here, since the summary is what grows. Whatever ``input_tokens`` holds beyond the
    messages (instructions, framing, priming) counts as instructions.
    """
    parts = dict.fromkeys(("summary", "window", "current"), 0)
    for source, tokens in zip(prepared.sources, prepared.message_tokens, strict=True):
        part = "summary" if source == "instructions_summary" else source
        if part in parts:
            parts[part] += tokens
    instructions = prepared.input_tokens - sum(parts.values())
    return Picture(row, instructions, parts["summary"], parts["window"], parts["current"], budget)


def turn_picture(memory: ShortTermMemory, told: Story, record: UsageRecord, budget: int) -> Picture:
    """A finished turn's request, rebuilt from its ledger ``record`` and the history's token counts: the current message
    is the turn's own, the recent window the messages sent before it, a summary present once a fold served this turn
    or an earlier one, and the rest of the counted input the instructions and that summary."""
    counts = memory.conversation.counts
    current_index = 2 * record.turn - 2
    if current_index >= len(counts):
        return Picture("turn", 0, 0, 0, 0, budget)
    has_summary = any(fold.serves <= record.turn and fold.count for fold in told.folds)
    sent = record.context_messages or 1
    window_messages = max(0, sent - 1 - has_summary)
    window = sum(counts[max(0, current_index - window_messages) : current_index])
    current = counts[current_index]
    instructions = min(request_sizes(memory).fixed, max(0, record.counted_input_tokens - window - current))
    summary = max(0, record.counted_input_tokens - window - current - instructions) if has_summary else 0
    instructions = record.counted_input_tokens - window - current - summary
    return Picture("turn", instructions, summary, window, current, budget)


def next_picture(memory: ShortTermMemory, plan: TurnPlan) -> Picture:
    """The next request as ``plan`` (the fold ahead's) sees it: after its fold, the instructions, the summary (reserved
    at full length when it folds), what stays in the recent window, and the message it plans for."""
    unfolded = memory.conversation.unfolded(memory.conversation.finished)
    window = sum(unfolded[plan.fold :])
    instructions = request_sizes(memory).fixed
    summary = max(0, plan.input_tokens - instructions - window - plan.message)
    return Picture("next", instructions, summary, window, plan.message, plan.budget)


def next_plan(memory: ShortTermMemory) -> TurnPlan | None:
    """``memory.plan()``: what the next message will fold, and its request's size; None while a reply is on its way,
    before the first message, or when even the smallest next request cannot fit (the page says why elsewhere)."""
    if not memory.conversation.messages or memory.conversation.pending:
        return None
    try:
        return memory.plan()
    except ValueError:  # ContextBudgetError is one; plan() with no text checks no session cap
        return None


def picture_budget(memory: ShortTermMemory) -> int:
    """The budget the pictures mark: the local tokens a plan weighs (``max_input_tokens`` offline)."""
    return local_budget(memory)


def picture_rows(pictures: Sequence[Picture], lang: str) -> list[dict[str, Any]]:
    """One row per part of each picture: the bar's name, the part's name and order, its tokens, its start and end.
    Plain rows, inlined in the spec: a DataFrame's Arrow encoding cost each turn box several milliseconds a run."""
    rows = []
    for picture in pictures:
        start = 0
        for order, part in enumerate(PARTS):
            tokens = picture.tokens(part)
            rows.append(
                {
                    "bar": t(lang, f"picture.row_{picture.row}"),
                    "part": t(lang, f"picture.{part}"),
                    "order": order,
                    "tokens": tokens,
                    "start": start,
                    "end": start + tokens,
                    "budget": picture.budget,
                }
            )
            start += tokens
    return rows


def picture_spec(pictures: Sequence[Picture], lang: str) -> dict[str, Any]:
    """A Vega-Lite spec of ``pictures``, their rows inlined (``picture_rows``): one horizontal stacked bar each, parts
    in the request's order, and the budget as a black tick across each bar. Hovering a part shows its name and tokens."""
    parts = [t(lang, f"picture.{part}") for part in PARTS]
    y = {"field": "bar", "type": "nominal", "title": None, "sort": None, "axis": {"labelLimit": 90}}
    tooltip = [{"field": "bar", "title": " "}, {"field": "part", "title": " "}, {"field": "tokens", "title": t(lang, "picture.tokens")}]
    return {
        "data": {"values": picture_rows(pictures, lang)},
        "height": {"step": 26},
        "layer": [
            {
                "mark": {"type": "bar", "stroke": "#FFFFFF", "strokeWidth": 0.5},
                "encoding": {
                    "y": y,
                    "x": {"field": "start", "type": "quantitative", "title": t(lang, "picture.tokens")},
                    "x2": {"field": "end"},
                    "color": {
                        "field": "part",
                        "type": "nominal",
                        "title": None,
                        "scale": {"domain": parts, "range": list(COLOURS)},
                        # The caption under the chart is the legend, its words in the parts' colours: a chart's own
                        # legend was cut at a phone's width ("current mes").
                        "legend": None,
                    },
                    "tooltip": tooltip,
                },
            },
            {
                "mark": {"type": "tick", "color": "#000000", "thickness": 2},
                "encoding": {"y": y, "x": {"field": "budget", "type": "quantitative"}},
            },
        ],
    }


def picture_caption(picture: Picture, lang: str) -> str:
    """The picture in words, and its legend: each part's tokens in its colour, then what was used of the budget and
    what was left (or passed)."""
    parts = " · ".join(f":{mark}[{t(lang, f'picture.{part}')} {picture.tokens(part):,}]" for part, mark in zip(PARTS, MARKS, strict=False))
    figures = {"used": f"{picture.used:,}", "budget": f"{picture.budget:,}", "free": f"{picture.free:,}", "over": f"{picture.over:,}"}
    return parts + " · " + t(lang, "picture.over" if picture.over else "picture.used", **figures)


def plan_caption(memory: ShortTermMemory, plan: TurnPlan, lang: str) -> str:
    """What the next message will fold, and why (the plan's reason), in one sentence."""
    if not plan.fold:
        return t(lang, "picture.next_none", message=plan.message)
    first = memory.conversation.folded + 1
    figures = {"first": first, "last": first + plan.fold - 1, "message": plan.message}
    reason = ""
    if plan.reason != "none":
        reason = t(lang, f"fold.because_{plan.reason}", turns=memory.max_recent_turns, budget=f"{plan.budget:,}")
    return t(lang, "picture.next_folds", because=reason, **figures)
