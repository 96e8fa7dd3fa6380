"""The sidebar panels: status, summary, last request context, full history, token usage.

Each is an expander. The full history and the token usage grow with the
conversation, so their expanders track their state and draw only while open:
a rerun then costs the same at turn 500 as at turn 10.
"""

from __future__ import annotations

import streamlit as st

from memora.i18n import t
from memora.memory import ShortTermMemory
from memora.ui import state as keys
from memora.ui.chart import usage_chart_frame, usage_chart_spec
from memora.ui.views import context_frame, history_frame, last_context_rows, status_figures
from memora.usage import ledger_frame
EARLIER_VERSIONS_SHOWN = 5
"""Earlier summary versions drawn in full; a long conversation has hundreds."""


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
        st.caption(t(lang, "status.bounded", full=f"{memory.full_history_tokens():,}", sent=f"{sent:,}", budget=f"{memory.max_input_tokens:,}"))


def render_summary(memory: ShortTermMemory, lang: str) -> None:
    with st.expander(t(lang, "panel.summary"), icon=":material/summarize:"):
        if not memory.summary_versions:
            st.caption(t(lang, "panel.summary_empty"))
            return
        versions = memory.summary_versions
        st.markdown(f"**{t(lang, 'panel.summary_current')}**")
        st.caption(_version_label(len(versions), versions[-1], lang))
        st.markdown(memory.summary)
        if len(versions) > 1:
            st.markdown(f"**{t(lang, 'panel.summary_versions')}**")
            shown = range(len(versions) - 1, max(0, len(versions) - 1 - EARLIER_VERSIONS_SHOWN), -1)
            for number in shown:
                with st.container(border=True):
                    st.caption(_version_label(number, versions[number - 1], lang))
                    st.markdown(versions[number - 1].text)
            hidden = len(versions) - 1 - len(shown)
            if hidden:
                st.caption(t(lang, "panel.summary_hidden", count=hidden))


def _version_label(number: int, version, lang: str) -> str:
    first, last = version.folded
    if last <= first:
        return t(lang, "panel.summary_version_rewrite", number=number, turn=version.turn, tokens=version.tokens)
    return t(lang, "panel.summary_version", number=number, turn=version.turn, first=first + 1, last=last, count=last - first, tokens=version.tokens)


def render_context(memory: ShortTermMemory, lang: str) -> None:
    with st.expander(t(lang, "panel.context"), icon=":material/input:"):
        rows = last_context_rows(memory)
        if not rows:
            st.caption(t(lang, "panel.context_empty"))
            return
        st.dataframe(context_frame(memory, lang), hide_index=True)
        used = memory.last_prepared.input_tokens if memory.last_prepared else 0
        st.progress(min(used / memory.max_input_tokens, 1.0), text=t(lang, "panel.budget", used=f"{used:,}", budget=f"{memory.max_input_tokens:,}"))


def render_history(memory: ShortTermMemory, lang: str) -> None:
    panel = st.expander(t(lang, "panel.history"), key=keys.HISTORY_PANEL_OPEN, on_change="rerun", icon=":material/forum:")
    with panel:
        if not panel.open:
            st.caption(t(lang, "panel.lazy_hint"))
        elif not memory.history:
            st.caption(t(lang, "panel.history_empty"))
        else:
            st.dataframe(history_frame(memory, lang), hide_index=True)


def render_usage(memory: ShortTermMemory, lang: str) -> None:
    panel = st.expander(t(lang, "panel.usage"), key=keys.USAGE_PANEL_OPEN, on_change="rerun", icon=":material/bar_chart:")
    with panel:
        if not panel.open:
            st.caption(t(lang, "panel.lazy_hint"))
            return
        if not memory.ledger:
            st.caption(t(lang, "panel.usage_empty"))
            return
        frame = usage_chart_frame(memory.ledger, memory.max_input_tokens, lang)
        st.vega_lite_chart(frame, usage_chart_spec(lang), width="stretch")
        st.markdown(f"**{t(lang, 'panel.usage_ledger')}**")
        ledger = ledger_frame(memory.ledger)
        st.dataframe(ledger.rename(columns={c: t(lang, f"ledger.{c}") for c in ledger.columns}), hide_index=True)
        st.download_button(
            t(lang, "panel.usage_download"),
            data=lambda: ledger.to_csv(index=False),  # built only when clicked
            file_name="memora-ledger.csv",
            mime="text/csv",
            icon=":material/download:",
        )
