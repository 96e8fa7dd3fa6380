"""Money for the usage ledger: a small, dated, editable price table.

Prices are USD per 1M tokens, standard tier (not Batch, not Flex, not Priority).
They were read on 2026-12-02 from stored copies of OpenAI's model pages
(https://developers.openai.com/api/docs/models/gpt-5-mini and .../gpt-5-nano);
the copies carry no date of their own, and the live pricing page
(https://developers.openai.com/api/docs/pricing) could not be reached from here.
``gpt-5`` comes from third-party tables that cite OpenAI's pricing page (2026),
not from an OpenAI page; its row says so. Check the live page before quoting money
to anyone, and edit ``DEFAULT_PRICES`` (or pass your own ``PriceTable``) when it moves.

A model missing from the table, and every request served by the offline engine,
gets no price: its cost is NaN in the frames and None in summaries, never a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import pandas as pd

from memora.teaching.ledger import ledger_frame
from memora.text.usage import UsageRecord

PRICES_CHECKED = "2026-12-02"
PRICES_NOTE = (
    f"USD per 1M tokens, standard tier, read {PRICES_CHECKED} from stored copies of OpenAI's "
    "model pages; not checked against the live pricing page. Edit the table if prices changed."
)
_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ModelPrice:
    """One model's prices in USD per 1M tokens.

    ``cached_input`` is what an input token served from OpenAI's prompt cache
    costs instead of ``input``. Reasoning tokens are billed as output tokens.
    Raises ValueError for a negative, infinite or NaN price.
    """

    model: str
    input: float
    cached_input: float
    output: float
    source: str = ""

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("a price needs a model name")
        for name in ("input", "cached_input", "output"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"{self.model}: the {name} price must be a finite number of 0 or more, not "
                    f"{value!r}"
                )


DEFAULT_PRICES: tuple[ModelPrice, ...] = (
    ModelPrice("gpt-5-mini", 0.25, 0.025, 2.00, "OpenAI model page, gpt-5-mini"),
    ModelPrice("gpt-5-nano", 0.05, 0.005, 0.40, "OpenAI model page, gpt-5-nano"),
    ModelPrice(
        "gpt-5", 1.25, 0.125, 10.00, "third-party tables citing OpenAI pricing (2026); unverified"
    ),
)


class PriceTable(Mapping[str, ModelPrice]):
    """Prices by model name, immutable.

    Lookup ignores case and a dated snapshot suffix, so ``gpt-5-mini-2025-08-07``
    finds ``gpt-5-mini``. A model that is not in the table is simply absent:
    ``price_for`` returns None.
    """

    def __init__(
        self, prices: Iterable[ModelPrice] = DEFAULT_PRICES, note: str = PRICES_NOTE
    ) -> None:
        self._prices = {price.model.strip().lower(): price for price in prices}
        self.note = note

    def __getitem__(self, model: str) -> ModelPrice:
        return self._prices[model.strip().lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._prices)

    def __len__(self) -> int:
        return len(self._prices)

    def price_for(self, model: str) -> ModelPrice | None:
        key = model.strip().lower()
        return self._prices.get(key) or self._prices.get(_DATED_SUFFIX.sub("", key))


COST_COLUMNS = ["input_cost_usd", "output_cost_usd", "cost_usd", "full_history_cost_usd"]


def request_cost(record: UsageRecord, prices: PriceTable) -> tuple[float, float] | None:
    """(input cost, output cost) in USD of one ledger row, or None when it cannot be priced.

    Billed input includes cached input; the cached part is charged at the cached
    rate. None when the model has no price or the server reported no split
    between input and output (the article's ``finish_turn`` with a bare total).
    """
    price = prices.price_for(record.model)
    if price is None or record.input_tokens is None or record.output_tokens is None:
        return None
    cached = min(record.cached_tokens, record.input_tokens)
    input_cost = (
        (record.input_tokens - cached) * price.input + cached * price.cached_input
    ) / 1_000_000
    return input_cost, record.output_tokens * price.output / 1_000_000


def ledger_cost_frame(
    records: Iterable[UsageRecord], prices: PriceTable | None = None, *, offline: bool = False
) -> pd.DataFrame:
    """``ledger.ledger_frame`` plus ``input_cost_usd``, ``output_cost_usd``, ``cost_usd``
    and ``full_history_cost_usd`` (what the reply's input would have cost with the
    whole history, uncached; replies only).

    Unpriced rows have NaN costs. ``offline=True`` (the offline engine, which no
    one bills) makes every cost NaN whatever the model column says.
    """
    records = list(records)
    prices = PriceTable() if prices is None else prices
    frame = ledger_frame(records)
    columns: dict[str, list[float]] = {name: [] for name in COST_COLUMNS}
    for record in records:
        cost = None if offline else request_cost(record, prices)
        price = None if offline else prices.price_for(record.model)
        input_cost, output_cost = cost if cost else (math.nan, math.nan)
        columns["input_cost_usd"].append(input_cost)
        columns["output_cost_usd"].append(output_cost)
        columns["cost_usd"].append(input_cost + output_cost)
        full = record.full_history_tokens
        columns["full_history_cost_usd"].append(
            full * price.input / 1_000_000 if price and full is not None else math.nan
        )
    for name, values in columns.items():
        frame[name] = pd.Series(values, index=frame.index, dtype="float64")
    return frame


@dataclass(frozen=True)
class CostSummary:
    """What a session cost, and what sending the full history would have cost.

    ``spent_usd`` covers every priced request, summaries included.
    ``full_history_usd`` is what the replies' input would have cost had each sent
    the whole history (output is the same either way, so it is left out of both
    sides); ``saved_usd = full_history_usd - (reply input + all summary requests)``,
    which is negative while summaries cost more than they save.
    All three are None when nothing could be priced (offline, or unknown models);
    ``unpriced_models`` names the models with no price, ``unpriced_requests`` counts rows left out.
    """

    spent_usd: float | None
    full_history_usd: float | None
    saved_usd: float | None
    unpriced_models: tuple[str, ...]
    unpriced_requests: int


def cost_summary(
    records: Iterable[UsageRecord], prices: PriceTable | None = None, *, offline: bool = False
) -> CostSummary:
    """Totals for the ledger; see ``CostSummary``. An empty ledger gives None figures."""
    records = list(records)
    prices = PriceTable() if prices is None else prices
    if offline:
        return CostSummary(None, None, None, (), len(records))
    spent = full = used_instead = 0.0
    priced = 0
    unpriced_models: list[str] = []
    for record in records:
        cost = request_cost(record, prices)
        if cost is None:
            if prices.price_for(record.model) is None and record.model not in unpriced_models:
                unpriced_models.append(record.model)
            continue
        priced += 1
        spent += sum(cost)
        price = prices.price_for(record.model)
        assert price is not None
        if record.kind == "reply" and record.full_history_tokens is not None:
            full += record.full_history_tokens * price.input / 1_000_000
            used_instead += cost[0]
        elif record.kind == "summary":
            used_instead += sum(cost)
    if not priced:
        return CostSummary(None, None, None, tuple(unpriced_models), len(records))
    return CostSummary(
        spent, full, full - used_instead, tuple(unpriced_models), len(records) - priced
    )


def format_usd(value: float | None) -> str:
    """``$0.000123`` style, enough digits for tiny classroom sessions; ``—`` for no price."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value == 0 or value >= 0.01:
        return f"{sign}${value:,.4f}"
    return f"{sign}${value:.6f}"
