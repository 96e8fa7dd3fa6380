"""The usage ledger as a pandas frame: the one table the page's panels, the chart and the cost
columns start from."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import asdict, fields

import pandas as pd

from memora.text.usage import RequestParts, UsageRecord

PART_COLUMNS = (
    "sent_instructions",
    "sent_summary",
    "sent_window",
    "sent_current",
    "sent_messages",
    "checked_budget",
    "summary_version",
    "fold_reason",
)
"""A request's parts (``RequestParts``), one column each: a table cell holds no nested record."""
LEDGER_COLUMNS = [*(f.name for f in fields(UsageRecord) if f.name != "parts"), *PART_COLUMNS]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a CSV cell as a formula (OWASP's CSV-injection rule):
``=HYPERLINK(...)`` in an imported model name would be a live link, ``=WEBSERVICE(...)`` a request
from the teacher's computer."""


def ledger_frame(records: Iterable[UsageRecord]) -> pd.DataFrame:
    """The ledger as a DataFrame, one row per request, in request order.

    An empty ledger gives an empty frame that still has every column. A request's parts are spread
    over ``PART_COLUMNS`` (empty for a record saved before records kept them); ``sent_messages``
    lists the chat numbers of the messages it carried ("3 4 5").
    """
    rows = []
    for record in records:
        row = asdict(record)
        del row["parts"]
        rows.append(row | part_columns(record.parts))
    return pd.DataFrame(rows, columns=LEDGER_COLUMNS)


def part_columns(parts: RequestParts | None) -> dict[str, int | str | None]:
    """``parts`` as the ledger's ``PART_COLUMNS``; every cell None without parts."""
    if parts is None:
        return dict.fromkeys(PART_COLUMNS)
    values = (
        parts.instructions,
        parts.summary,
        parts.window_tokens,
        parts.current_tokens,
        " ".join(map(str, parts.numbers)),
        parts.budget,
        parts.version,
        parts.reason,
    )
    return dict(zip(PART_COLUMNS, values, strict=True))


def ledger_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV that no spreadsheet runs (OWASP's rule): a text cell starting with one of
    ``FORMULA_STARTS`` is prefixed with ``'``, which spreadsheets show as text, and every text cell
    is quoted, so a line break or a comma inside one cannot start a new row or cell.

    Only text cells change: a number column keeps its numbers, unquoted, negative ones included, so
    sums still work. The ledger's text (its model, source and kind) may come from an imported file,
    so it is never trusted.
    """
    return frame.apply(_inert_text).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def _inert_text(column: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return column
    return column.map(
        lambda cell: (
            "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell
        )
    )
