"""The sidebar panels: status, summary, last request context, full history, token usage.

Each is an expander. The full history and the token usage grow with the
conversation, so their expanders track their state and draw only while open:
a rerun then costs the same at turn 500 as at turn 10.
"""

from __future__ import annotations

import streamlit as st

from memora.memory import ShortTermMemory
from memora.ui import budget, render
from memora.ui import state as keys
from memora.ui.chart import usage_chart_frame, usage_chart_spec
from memora.ui.costs import ledger_table, money_columns, render_costs
from memora.ui.i18n import t
from memora.ui.summary_audit import render_summary_audit
from memora.ui.views import calibration_note, context_frame, fold_note, history_frame, last_context_rows, status_figures


def render_panels(memory: ShortTermMemory, lang: str) -> None:
    render_status(memory, lang)
    render_summary(memory, lang)
    render_context(memory, lang)
    render_history(memory, lang)
    render_usage(memory, lang)


def render_status(memory: ShortTermMemory, lang: str) -> None:
    with st.expander(t(lang, "panel.status"), expanded=True, icon=":material/monitoring:"):
        figures = status_figures(memory, lang)
        columns = st.columns(2)
        for position, figure in enumerate(figures):
            columns[position % 2].metric(t(lang, figure.key), figure.value)
        sent = memory.last_prepared.input_tokens if memory.last_prepared else 0
        full = f"{memory.full_history_tokens():,}"
        render.caption(t(lang, "status.bounded", full=full, sent=f"{sent:,}", budget=f"{memory.max_input_tokens:,}"))
        render.caption(fold_note(memory, lang))
        render.caption(calibration_note(memory, lang))
        budget.render_standing(memory, lang)


def render_summary(memory: ShortTermMemory, lang: str) -> None:
    with st.expander(t(lang, "panel.summary"), icon=":material/summarize:"):
        if not memory.summary_versions:
            render.caption(t(lang, "panel.summary_empty"))
            return
        render.markdown(f"**{t(lang, 'panel.summary_current')}**")
        render.markdown(memory.summary)
        render_summary_audit(memory, lang)


def render_context(memory: ShortTermMemory, lang: str) -> None:
    with st.expander(t(lang, "panel.context"), icon=":material/input:"):
        rows = last_context_rows(memory)
        if not rows:
            render.caption(t(lang, "panel.context_empty"))
            return
        st.dataframe(context_frame(memory, lang), hide_index=True)
        used = memory.last_prepared.input_tokens if memory.last_prepared else 0
        label = t(lang, "panel.budget", used=f"{used:,}", budget=f"{memory.max_input_tokens:,}")
        st.progress(min(used / memory.max_input_tokens, 1.0), text=label)


def render_history(memory: ShortTermMemory, lang: str) -> None:
    panel = st.expander(t(lang, "panel.history"), key=keys.HISTORY_PANEL_OPEN, on_change="rerun", icon=":material/forum:")
    with panel:
        if not panel.open:
            render.caption(t(lang, "panel.lazy_hint"))
        elif not memory.history:
            render.caption(t(lang, "panel.history_empty"))
        else:
            st.dataframe(history_frame(memory, lang), hide_index=True)


def render_usage(memory: ShortTermMemory, lang: str) -> None:
    panel = st.expander(t(lang, "panel.usage"), key=keys.USAGE_PANEL_OPEN, on_change="rerun", icon=":material/bar_chart:")
    with panel:
        if not panel.open:
            render.caption(t(lang, "panel.lazy_hint"))
            return
        if not memory.ledger:
            render.caption(t(lang, "panel.usage_empty"))
            return
        frame = usage_chart_frame(memory.ledger, memory.max_input_tokens, lang)
        st.vega_lite_chart(frame, usage_chart_spec(lang), width="stretch")
        render_costs(memory.ledger, lang)
        render.markdown(f"**{t(lang, 'panel.usage_ledger')}**")
        ledger = ledger_table(memory.ledger)
        st.dataframe(
            ledger.rename(columns={c: t(lang, f"ledger.{c}") for c in ledger.columns}), hide_index=True, column_config=money_columns(lang)
        )
        st.download_button(
            t(lang, "panel.usage_download"),
            data=lambda: ledger.to_csv(index=False),  # built only when clicked
            file_name="memora-ledger.csv",
            mime="text/csv",
            icon=":material/download:",
        )
