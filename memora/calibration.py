"""How far the server's token count is from Memora's local o200k_base count.

OpenAI bills with o200k_base, so there a local count is the bill. A local model
has its own tokenizer: SmolLM2's counted 8% to 40% more than o200k_base on
these machines' chats, and a budget planned from local counts alone then slips by that much.
``Calibration`` learns the ratio from what the server reports (its prompt counts
in summary responses and in any usage it sends) and turns the budget into a
local-count budget that holds by the server's own count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

UNKNOWN_TOKENIZER_MARGIN = 1.5
"""Planning ratio for a server whose tokenizer is unknown, until it reports a count.
SmolLM2 on llama.cpp counted up to 1.40× o200k_base (``benchmarks/token_gap.py``)."""

LEARNED_SLACK = 1.03
"""Kept above the highest observed ratio: one request's text is not every request's."""

IMPLAUSIBLE_SHARE = 0.5
"""Reported input below this share of the local count is no bill: no tokenizer for
these languages is twice as efficient as o200k_base. LiteLLM's streamed usage, which
leaves the instructions out, reported 21 tokens for a 95-token request."""


def implausible(counted: int, reported: int) -> bool:
    """Whether a server's reported input count is too low to be the request's real cost."""
    return counted > 0 and reported < counted * IMPLAUSIBLE_SHARE


@dataclass(frozen=True)
class Calibration:
    """The server-to-local token ratio a memory plans with.

    ``exact`` means the server counts with o200k_base: the ratio stays 1 and
    reports do not move it. Otherwise ``ratio`` starts at
    ``UNKNOWN_TOKENIZER_MARGIN`` and, from the first plausible report on, is the
    highest ratio seen times ``LEARNED_SLACK``. ``observed`` is the highest raw
    ratio seen, and ``reports`` how many reports it was learned from.
    """

    exact: bool = True
    observed: float | None = None
    reports: int = 0

    @property
    def ratio(self) -> float:
        if self.exact:
            return 1.0
        if self.observed is None:
            return UNKNOWN_TOKENIZER_MARGIN
        return max(1.0, self.observed) * LEARNED_SLACK

    def learn(self, counted: int, reported: int) -> Calibration:
        """This calibration after the server counted ``reported`` tokens for ``counted`` local ones.

        Implausible reports (see ``implausible``) and exact servers change nothing.
        """
        if self.exact or counted <= 0 or implausible(counted, reported):
            return self
        ratio = reported / counted
        return Calibration(False, ratio if self.observed is None else max(self.observed, ratio), self.reports + 1)

    def local_budget(self, server_tokens: int) -> int:
        """The most local tokens that stay within ``server_tokens`` by the server's count."""
        return math.floor(server_tokens / self.ratio)

    def server_estimate(self, local_tokens: int) -> int:
        """What ``local_tokens`` are expected to cost by the server's count."""
        return math.ceil(local_tokens * self.ratio)
