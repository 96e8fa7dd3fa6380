"""The usage ledger as a pandas frame: the one table the page's panels, the chart and the cost columns start from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, fields

import pandas as pd

from memora.tokens.usage import UsageRecord

LEDGER_COLUMNS = [f.name for f in fields(UsageRecord)]


def ledger_frame(records: Iterable[UsageRecord]) -> pd.DataFrame:
    """The ledger as a DataFrame, one row per request, in request order.

    An empty ledger gives an empty frame that still has every column.
    """
    return pd.DataFrame([asdict(r) for r in records], columns=LEDGER_COLUMNS)
