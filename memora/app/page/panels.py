"""The sidebar panels: status, summary, last request context, full history, token usage, what if.

Each is an expander. The last request's context, the full history, the token usage and the "what if"
replays track their state and draw only while open: the long ones page through what grows with the
conversation (``memora.app.page.pager``), so a rerun costs the same at turn 2,000 as at turn 10, and
a closed panel costs a run next to nothing (every student's page runs twice a turn). The replays are
also kept per history length (``what_if_for``), so a rerun with no new turn redoes none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from memora.app.page import budget, glossary, render
from memora.app.page import state as keys
from memora.app.page.chart import usage_chart, usage_chart_spec
from memora.app.page.costs import ledger_table, render_costs, shown_ledger
from memora.app.page.derived import Same, conversation_key, derived, memory_story
from memora.app.page.i18n import role_name, t
from memora.app.page.markup import small
from memora.app.page.pager import page_of, render_pager
from memora.app.page.picture import (
    next_picture,
    next_plan,
    picture_caption,
    picture_key,
    picture_spec,
    plan_caption,
    request_picture,
)
from memora.app.page.settings_panel import render_fold_policy
from memora.app.page.summary_audit import render_summary_audit
from memora.app.page.views import (
    bounded_note,
    calibration_note,
    fold_label,
    fold_note,
    history_frame,
    last_context_rows,
    payoff_note,
    request_turn,
    status_line,
    what_if_frame,
)
from memora.memory import ShortTermMemory
from memora.memory.core import last_sent
from memora.teaching.audit import escape_markdown
from memora.teaching.ledger import ledger_csv
from memora.teaching.prices import cost_summary
from memora.teaching.story import Fold
from memora.teaching.what_if import WhatIf, cache_key, payoffs, what_if


def render_panels(memory: ShortTermMemory, lang: str) -> None:
    render_picture(memory, lang)
    render_current_summary(memory, lang)
    render.markdown(status_line(memory, lang))
    render_status(memory, lang)
    render_summary(memory, lang)
    render_context(memory, lang)
    render_history(memory, lang)
    render_usage(memory, lang)
    render_what_if(memory, lang)


@dataclass(frozen=True)
class PictureView:
    """The sidebar's picture as drawn: the chart's spec (None before any request or plan), and its
    sentences."""

    spec: dict[str, Any] | None
    sent: str | None
    plan: str | None


def picture_view(memory: ShortTermMemory, lang: str) -> PictureView:
    """The last request's record and the next request's plan as the sidebar draws them."""
    sent = last_sent(memory)
    plan = next_plan(memory)
    pictures = [] if sent is None else [request_picture(sent)]
    if plan is not None:
        pictures.append(next_picture(plan))
    return PictureView(
        picture_spec(pictures, lang) if pictures else None,
        None
        if sent is None
        else t(lang, "picture.sent_caption", parts=picture_caption(pictures[0], lang)),
        None if plan is None else plan_caption(memory, plan, lang),
    )


def render_picture(memory: ShortTermMemory, lang: str) -> None:
    """The last request against the budget, part by part, and beside it the plan of the next one:
    what the next message will fold first, and why. Drawn before every panel: it is what the page
    teaches. Planned again only when the conversation, a setting or what the server taught changed:
    every student's page runs twice a turn."""
    render.markdown(f"**{t(lang, 'picture.title')}**")
    server = memory.server
    key = (
        *conversation_key(memory),
        Same(memory.limits),
        Same(server),
        Same(server.calibration),
        server.server_window,
        lang,
    )
    view = derived("picture", key, lambda: picture_view(memory, lang))
    if view.spec is None:
        render.caption(t(lang, "picture.empty"))
        return
    render.chart(view.spec)
    # The key and the two sentences are one element under the chart: every run of every page draws
    # them.
    words = [picture_key(lang)]
    if view.sent is not None:
        words.append(small(view.sent))
    if view.plan is not None:
        words.append(view.plan)
    render.markdown("\n\n".join(words))


def render_current_summary(memory: ShortTermMemory, lang: str) -> None:
    """The summary the next request sends, under the picture: which version, which messages it
    holds, its text."""
    versions = memory.conversation.versions
    if not versions:
        render.caption(t(lang, "panel.summary_empty"))
        return
    render.markdown(
        f"**{t(lang, 'summary.now', version=len(versions), last=memory.summarized_message_count)}**"
    )
    render.caption(memory.summary)


def render_status(memory: ShortTermMemory, lang: str) -> None:
    """What the memory is set to and why it last folded, one click away: its figures are
    ``status_line``'s, above it."""
    with st.expander(t(lang, "panel.status"), icon=":material/monitoring:"):
        render.caption(bounded_note(memory, lang), help=glossary.explain(lang, "budget", "token"))
        # one click away: the article's window by default, the watermark beside it
        render_fold_policy(lang)
        render.caption(fold_note(memory, lang), help=glossary.explain(lang, "fold"))
        render.caption(calibration_note(memory, lang))
        budget.render_standing(memory, lang)


def render_summary(memory: ShortTermMemory, lang: str) -> None:
    # Drawn only while open: its audit of every version grows with the conversation and cost every
    # run of every page.
    with render.lazy_panel(
        lang, "panel.summary", keys.SUMMARY_PANEL_OPEN, ":material/summarize:"
    ) as opened:
        if not opened:
            return
        if not memory.conversation.versions:
            render.caption(t(lang, "panel.summary_empty"))
            return
        render.markdown(f"**{t(lang, 'panel.summary_current')}**")
        render.markdown(memory.summary)
        render_summary_audit(memory, lang)


def render_context(memory: ShortTermMemory, lang: str) -> None:
    # Drawn only while open, like the long panels: its table costs every run of every student,
    # opened or not.
    with render.lazy_panel(
        lang, "panel.context", keys.CONTEXT_PANEL_OPEN, ":material/input:"
    ) as opened:
        if not opened:
            return
        rows = last_context_rows(memory, memory_story(memory).folds)
        if not rows:
            render.caption(t(lang, "panel.context_empty"))
            return
        sent_in = request_turn(memory)
        for row in rows:
            labels = [role_name(lang, row.role), t(lang, f"source.{row.source}")]
            if row.number is not None:
                labels.insert(0, t(lang, "chat.number", number=row.number))
            if row.folded_for is not None and sent_in is not None:
                labels.append(t(lang, "context.folded_since", sent=sent_in, next=row.folded_for))
            render_card(labels, row.tokens, row.content, lang)


def render_card(labels: list[str], tokens: int, content: str, lang: str) -> None:
    """One message as a card, not a table row: its ``labels`` and ``tokens`` in one line, the start
    of its ``content``, and the whole of it one click away. Nothing is cut at a phone's width, where
    a table's columns were."""
    with st.container(border=True):
        render.caption(" · ".join([*labels, t(lang, "context.tokens", tokens=tokens)]))
        render.plain(preview(content))
        with st.popover(t(lang, "context.open"), icon=":material/open_in_full:"):
            render.plain(content)


PREVIEW_CHARS = 90
"""The start of a message its card shows; the whole of it is one click away."""


def preview(text: str) -> str:
    """The first ``PREVIEW_CHARS`` characters of ``text`` on one line, with "…" where it goes on."""
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


HISTORY_PAGE = 50
"""Rows of the full history drawn at a time: 25 turns."""
LEDGER_PAGE = 50
"""Rows of the ledger drawn at a time; the CSV download holds them all."""


def render_history(memory: ShortTermMemory, lang: str) -> None:
    with render.lazy_panel(
        lang, "panel.history", keys.HISTORY_PANEL_OPEN, ":material/forum:"
    ) as opened:
        if not opened:
            return
        total = len(memory.conversation.messages)
        if not total:
            render.caption(t(lang, "panel.history_empty"))
            return
        page = page_of(total, HISTORY_PAGE, st.session_state[keys.HISTORY_PAGE])
        render_pager(lang, keys.HISTORY_PAGE, page)
        for number, role, state, tokens, content in history_frame(
            memory, lang, page.start, page.stop
        ).itertuples(index=False):
            render_card([str(number), role, state], tokens, content, lang)


def render_usage(memory: ShortTermMemory, lang: str) -> None:
    with render.lazy_panel(
        lang, "panel.usage", keys.USAGE_PANEL_OPEN, ":material/bar_chart:"
    ) as opened:
        if not opened:
            return
        if not memory.ledger:
            render.caption(t(lang, "panel.usage_empty"))
            return
        key = (*conversation_key(memory), memory.max_input_tokens, lang)
        other = what_if_for(memory).other
        chart = derived(
            "usage_chart",
            (*key, Same(other)),
            lambda: usage_chart(memory.ledger, memory.max_input_tokens, lang, [other]),
        )
        st.vega_lite_chart(chart.frame, usage_chart_spec(lang, [other.strategy]), width="stretch")
        render.caption(t(lang, "whatif.chart_note", strategy=t(lang, f"whatif.{other.strategy}")))
        render.caption(t(lang, "chart.fold_ahead_note"))
        if chart.turns_per_point > 1:
            render.caption(t(lang, "chart.buckets", turns=chart.turns_per_point))
        render_costs(
            memory.ledger,
            lang,
            summary=derived("cost_summary", key, lambda: cost_summary(memory.ledger)),
        )
        render.markdown(
            f"**{t(lang, 'panel.usage_ledger')}**", help=glossary.explain(lang, "ledger")
        )
        ledger = derived("ledger_table", key, lambda: ledger_table(memory.ledger))
        page = page_of(len(ledger), LEDGER_PAGE, st.session_state[keys.LEDGER_PAGE])
        render_pager(lang, keys.LEDGER_PAGE, page)
        folds = memory_story(memory).by_request()
        # its words in the page's language
        shown = shown_ledger(ledger.iloc[page.start : page.stop], lang)
        for position, (_, row) in enumerate(shown.iterrows(), start=page.start):
            render_request_card(row, position, folds.get(position), lang)
        st.download_button(
            t(lang, "panel.usage_download"),
            # built only when clicked; no cell a spreadsheet would run
            data=lambda: ledger_csv(ledger),
            file_name="memora-ledger.csv",
            mime="text/csv",
            icon=":material/download:",
        )


def render_request_card(row: pd.Series, position: int, fold: Fold | None, lang: str) -> None:
    """One model request of the ledger as a card: its number, turn, kind (a summary's fold label
    with it), counted input and total, and every figure of its ledger row one click away; the CSV
    download holds them all, as columns."""
    kind = row["kind"]
    if fold is not None:
        kind = t(
            lang,
            "ledger.summary_fold",
            kind=kind,
            version=fold.version,
            label=fold_label(fold, lang),
        )
    head = [
        str(position + 1),
        f"{t(lang, 'ledger.turn')} {row['turn']}",
        kind,
        # Named as the What if table names it: that table's "yours" column adds up these figures.
        f"{t(lang, 'ledger.counted_input_tokens')} {row['counted_input_tokens']:,}",
        f"{t(lang, 'ledger.total_tokens')} {row['total_tokens']:,}",
    ]
    with st.container(border=True):
        render.caption(" · ".join(head))
        with st.popover(t(lang, "ledger.open"), icon=":material/open_in_full:"):
            figures = [
                f"| {t(lang, f'ledger.{name}')} | {ledger_cell(value)} |"
                for name, value in row.items()
            ]
            render.markdown(
                f"| {t(lang, 'stats.figure')} | {t(lang, 'stats.value')} |\n|---|--:|\n"
                + "\n".join(figures)
            )


def ledger_cell(value: object) -> str:
    """A ledger figure as its card shows it: thousands separated, dollars to six places, an empty
    cell as "–"."""
    # a pandas cell holds NumPy's scalars, not Python's
    value = value.item() if hasattr(value, "item") else value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6f}".rstrip("0").rstrip(".") or "0"
    return escape_markdown(str(value))


WHAT_IF_TABLE_STYLE = [
    {"selector": "th", "props": [("font-size", "0.8125rem"), ("padding", "0.125rem 0.1875rem")]},
    {"selector": "td", "props": [("font-size", "0.8125rem"), ("padding", "0.125rem 0.1875rem")]},
]
"""The what-if table's cells: 13 px type and 3 px sides (Streamlit's are 14 px and 6 px). At 390 px
a phone's sidebar holds 255 px of table; the four columns at Streamlit's own sizes took 276, and
scrolled sideways."""


def what_if_for(memory: ShortTermMemory) -> WhatIf:
    """``what_if(memory)``, replayed again only when the history, its folds or a setting changed
    since the last time."""
    state = st.session_state
    key = cache_key(memory)
    cached = state[keys.WHAT_IF]
    if cached is None or cached[0] != key:
        cached = (key, what_if(memory))
        state[keys.WHAT_IF] = cached
    return cached[1]


def render_what_if(memory: ShortTermMemory, lang: str) -> None:
    with render.lazy_panel(
        lang, "panel.what_if", keys.WHAT_IF_PANEL_OPEN, ":material/compare_arrows:"
    ) as opened:
        if not opened:
            return
        comparison = what_if_for(memory)
        if not comparison.turns:
            render.caption(t(lang, "whatif.empty"))
            return
        render.caption(t(lang, "whatif.intro"), help=glossary.explain(lang, "ledger"))
        # One table, the strategies as columns: st.table wraps its cells' words to the sidebar's
        # width (a Markdown table spilled out of it), in a smaller type with less padding so that
        # four columns fit a phone's sidebar.
        st.table(what_if_frame(comparison, lang).style.set_table_styles(WHAT_IF_TABLE_STYLE))
        for pay in payoffs(comparison):
            render.caption(payoff_note(pay, lang))
        priced = comparison.model is not None
        render.caption(
            t(lang, "whatif.priced", model=comparison.model)
            if priced
            else t(lang, "whatif.unpriced")
        )
        render.caption(t(lang, "whatif.assumptions", cap=f"{comparison.other_cap:,}"))
