"""The chat's turn boxes: a collapsed box draws its title and nothing of its body.

Streamlit runs a collapsed expander's body on every run, and a chart converts its data each time it is drawn: the
turn boxes' hidden pictures made the page cost 1.84x the CPU per turn with 40 students (issue 43). A box draws its
picture, caption, table and fold lines only while it is open; what it shows closed (its title, the cut note, the
over-budget warning) stays. The cost itself is measured by ``benchmarks/classroom_load.py``, not asserted here.
"""

from __future__ import annotations

import json

import pytest

from memora.app.page import state as keys
from memora.memory import ShortTermMemory
from tests.support.app import expander, new_app, open_turn_boxes, send
from tests.support.lesson import B1, FILLER

pytestmark = pytest.mark.usefixtures("no_secrets")


def turn_box(at, turn: int, lang: str = "en"):
    return expander(at, f"Turn {turn}: tokens and context" if lang == "en" else f"第 {turn} 輪：Token 與上下文")


def drawn(box) -> list[str]:
    """The kinds of the elements inside ``box``, in order."""
    return [child.type for child in box.children.values()]


def test_a_collapsed_turn_box_draws_no_chart_and_an_opened_one_draws_the_turns_picture_and_table():
    at = new_app()
    for text in [B1, *FILLER[:2]]:
        send(at, text)
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    replies = {record.turn: record for record in memory.ledger if record.kind == "reply"}
    assert sorted(replies) == [1, 2, 3]

    for turn in replies:
        assert drawn(turn_box(at, turn)) == [], f"turn {turn}'s box is collapsed: its body is not drawn"

    open_turn_boxes(at, 2)
    opened = turn_box(at, 2)
    charts = opened.get("vega_lite_chart")
    assert len(charts) == 1, "the opened box draws its turn's picture"
    # Its rows travel inside the spec, each layer's own, not as an Arrow table Streamlit would convert on every run.
    spec = json.loads(charts[0].proto.spec)
    assert "data" not in spec and not charts[0].proto.data.data and not charts[0].proto.datasets
    parts, ticks = (layer["data"]["values"] for layer in spec["layer"])
    sent = replies[2].parts
    assert sent is not None
    assert sum(row["tokens"] for row in parts) == sent.budget, "the parts and the free room fill the budget"
    assert ticks == [{"bar": "This request", "budget": sent.budget}], "the budget's tick has rows of its own"
    counted = replies[2].counted_input_tokens
    assert f"| Counted input tokens (local, before sending) | {counted:,} |" in opened.markdown[0].value
    assert drawn(turn_box(at, 1)) == drawn(turn_box(at, 3)) == [], "the other boxes stay collapsed and empty"

    # A new turn leaves the opened box open (its key is the turn's), and the new turn's box starts collapsed.
    send(at, FILLER[2])
    assert turn_box(at, 2).get("vega_lite_chart")
    assert drawn(turn_box(at, 4)) == []

    at.session_state[keys.turn_box_open(2)] = False
    at.run()
    assert drawn(turn_box(at, 2)) == [], "closed again, the box draws nothing"


def test_an_open_turn_box_stays_open_through_a_language_switch():
    at = new_app()
    send(at, B1)
    open_turn_boxes(at, 1)
    assert turn_box(at, 1).get("vega_lite_chart")

    at.radio(key=keys.LANG).set_value("zh-TW").run()
    # The switch renames the box, and Streamlit counts a renamed expander as a new one: the switch carries it over.
    assert turn_box(at, 1, "zh-TW").get("vega_lite_chart")
