"""Money in the token-usage panel: cost columns, what was spent and saved, the price table's date.

Money is shown only where ``memora.teaching.prices`` has a price for the model that
served a request. The ledger names the offline engine ``"offline"`` (see
``memora.memory.core.served_by``), which has no price, and a model missing from
the table has none either: those rows show tokens only, never a guessed cost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from memora.app.page import render
from memora.app.page.i18n import t
from memora.teaching.prices import (
    COST_COLUMNS,
    PRICES_CHECKED,
    CostSummary,
    PriceTable,
    cost_summary,
    format_usd,
    ledger_cost_frame,
)
from memora.text.usage import UsageRecord

OFFLINE_MODEL = "offline"
"""The ledger's model name for requests the offline engine served."""


def ledger_table(records: Sequence[UsageRecord], prices: PriceTable | None = None) -> pd.DataFrame:
    """The ledger with its cost columns in USD when at least one row is priced; tokens only
    otherwise.

    Unpriced rows in a priced ledger have NaN costs (an empty cell), not 0.
    """
    frame = ledger_cost_frame(records, prices)
    if frame["cost_usd"].isna().all():
        return frame.drop(columns=COST_COLUMNS)
    return frame


def price_list(prices: PriceTable | None = None) -> str:
    """``gpt-5-mini $0.25 / $0.025 / $2.00 · …``: each model's input, cached input and output price
    per 1M tokens."""
    prices = PriceTable() if prices is None else prices
    return " · ".join(
        f"{p.model} ${p.input:g} / ${p.cached_input:g} / ${p.output:g}" for p in prices.values()
    )


def render_costs(
    records: Sequence[UsageRecord],
    lang: str,
    prices: PriceTable | None = None,
    *,
    summary: CostSummary | None = None,
) -> None:
    """Spent, full-history cost and saved, in USD, when anything is priced; then which rows show
    tokens only. ``summary``: ``cost_summary(records, prices)`` when the caller keeps it already."""
    summary = cost_summary(records, prices) if summary is None else summary
    if summary.spent_usd is not None:
        spent, full, saved = st.columns(3)
        spent.metric(t(lang, "cost.spent"), format_usd(summary.spent_usd))
        full.metric(t(lang, "cost.full_history"), format_usd(summary.full_history_usd))
        saved.metric(
            t(lang, "cost.saved"), format_usd(summary.saved_usd), help=t(lang, "cost.saved_help")
        )
    unpriced = [model for model in summary.unpriced_models if model != OFFLINE_MODEL]
    if OFFLINE_MODEL in summary.unpriced_models:
        render.caption(t(lang, "cost.offline_only"))
    if unpriced:
        render.caption(t(lang, "cost.tokens_only", models=", ".join(unpriced)))
    render.caption(t(lang, "cost.note", date=PRICES_CHECKED, prices=price_list(prices)))


_SOURCE = re.compile(r"(estimated|billed|reported) by (.+)")


def source_name(lang: str, source: str) -> str:
    """A ledger row's ``source`` (``memora.text.usage.usage_label``) in ``lang``; text of another
    shape, from an imported file, shows as it is."""
    if source == "estimated locally (o200k_base)":
        return t(lang, "ledger.source_local")
    matched = _SOURCE.fullmatch(source)
    if matched is None:
        return source
    by = t(lang, "ledger.source_the_server") if matched[2] == "the server" else matched[2]
    return t(lang, f"ledger.source_{matched[1]}", by=by)


def shown_ledger(ledger: pd.DataFrame, lang: str) -> pd.DataFrame:
    """One page of the ledger in ``lang``'s words: kind, source and the offline engine's model name.

    The CSV download keeps the ledger's own words (``ledger_csv``), which a script reads back.
    """
    return ledger.assign(
        kind=ledger["kind"].map(
            lambda kind: t(lang, f"kind.{kind}") if kind in ("reply", "summary") else kind
        ),
        model=ledger["model"].map(
            lambda model: t(lang, "ledger.offline_model") if model == OFFLINE_MODEL else model
        ),
        source=ledger["source"].map(lambda source: source_name(lang, source)),
    )
