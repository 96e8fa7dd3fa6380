"""The usage ledger as a pandas frame: the one table the page's panels, the chart and the cost columns start from."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import asdict, fields

import pandas as pd

from memora.text.usage import UsageRecord

LEDGER_COLUMNS = [f.name for f in fields(UsageRecord)]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a CSV cell as a formula (OWASP's CSV-injection rule): ``=HYPERLINK(...)`` in an
imported model name would be a live link, ``=WEBSERVICE(...)`` a request from the teacher's computer."""


def ledger_frame(records: Iterable[UsageRecord]) -> pd.DataFrame:
    """The ledger as a DataFrame, one row per request, in request order.

    An empty ledger gives an empty frame that still has every column.
    """
    return pd.DataFrame([asdict(r) for r in records], columns=LEDGER_COLUMNS)


def ledger_csv(frame: pd.DataFrame) -> str:
    """``frame`` as CSV that no spreadsheet runs (OWASP's rule): a text cell starting with one of ``FORMULA_STARTS``
    is prefixed with ``'``, which spreadsheets show as text, and every text cell is quoted, so a line break or a
    comma inside one cannot start a new row or cell.

    Only text cells change: a number column keeps its numbers, unquoted, negative ones included, so sums still work.
    The ledger's text (its model, source and kind) may come from an imported file, so it is never trusted.
    """
    return frame.apply(_inert_text).to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def _inert_text(column: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return column
    return column.map(lambda cell: "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell)
