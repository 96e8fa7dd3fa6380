"""How far the server's token count is from Memora's local o200k_base count, per kind of text.

OpenAI bills with o200k_base, so there a local count is the bill. A local model
has its own tokenizer, and its gap depends on the language: SmolLM2's counts
English at 1.11x o200k_base but Chinese at 2.05x and Japanese at 2.32x, so a ratio
learned from mixed text undershoots pure CJK text. ``Calibration`` keeps CJK,
Latin and other text apart (``kind_tokens``). Each kind starts from the worst ratio
measured across common tokenizers (``WORST_KNOWN_RATIO``; docs/backends.md has the
table and the command that made it) and is then learned from what the server
itself counted: its tokenizer endpoint (``memora.backends.server_tokenizer``), the
prompt counts of its non-streamed responses, or a context-overflow error's figures.
Figures a server merely estimated never teach it (``UsageRecord.teaches``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memora.text.tokens import COUNT_CACHE_TEXT_CHARS, count_once, count_text

Kind = Literal["cjk", "latin", "other"]
KINDS: tuple[Kind, ...] = ("cjk", "latin", "other")

WORST_KNOWN_RATIO: dict[Kind, float] = {"cjk": 2.45, "latin": 1.71, "other": 3.89}
"""The highest server-to-o200k_base ratio measured for each kind (docs/backends.md,
``benchmarks/tokenizer_table.py``), all SmolLM2's: CJK on Japanese (2.45x; Chinese 2.22x), Latin on
Portuguese (1.71x; English 1.01x, and up to 1.40x with its chat template's tokens on short
messages), other on Korean (3.89x; Russian 2.77x). A kind of text the server has not yet counted is
planned with it."""

BEST_KNOWN_RATIO: dict[Kind, float] = {"cjk": 0.65, "latin": 0.95, "other": 0.8}
"""Below the lowest ratio measured for each kind (Gemma 3: Japanese 0.70x, English 1.00x, Russian
0.86x): when a request mixes kinds, the others are credited at this much, so that what is left for
the kind being learned is never less than its real share."""

LEARNED_SLACK = 1.03
"""Kept above the highest observed ratio: one request's text is not every request's."""

MIN_SHARE = 0.3
"""A kind is learned from a request only where it holds this share of the request's local tokens: a
few Chinese characters in an English request say little about Chinese."""

IMPLAUSIBLE_SHARE = 0.5
"""Reported input below this share of the local count is no bill: no tokenizer for
these languages is twice as efficient as o200k_base. LiteLLM's streamed usage, which
leaves the instructions out, reported 21 tokens for a 95-token request."""

_CJK = (
    r"\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff"
)
_LATIN = r"\u0000-\u024f\u1e00-\u1eff\u2000-\u206f"
_RUNS = re.compile(f"([{_CJK}]+)|([{_LATIN}]+)|([^{_CJK}{_LATIN}]+)")


def implausible(counted: int, reported: int) -> bool:
    """Whether a server's reported input count is too low to be the request's real cost."""
    return counted > 0 and reported < counted * IMPLAUSIBLE_SHARE


def kind_tokens(text: str) -> dict[Kind, int]:
    """The local tokens of ``text`` by kind: runs of CJK (Han, kana, bopomofo, CJK punctuation and
    full-width forms), Latin (ASCII and the Latin letters, with their punctuation) and other
    scripts, each run counted apart. Hangul is "other": SmolLM2 counts Korean at 3.9x o200k_base,
    far from Chinese and Japanese.

    Kinds absent from ``text`` are absent from the result; ``""`` gives ``{}``.
    """
    return (
        dict(_kind_tokens(text))
        if len(text) <= COUNT_CACHE_TEXT_CHARS
        else dict(_split(text, count_once))
    )


@lru_cache(maxsize=4096)
def _kind_tokens(text: str) -> tuple[tuple[Kind, int], ...]:
    return _split(text, count_text)


def _split(text: str, count: object) -> tuple[tuple[Kind, int], ...]:
    totals: dict[Kind, int] = {}
    for match in _RUNS.finditer(text):
        kind = KINDS[match.lastindex - 1]  # type: ignore[operator]
        totals[kind] = totals.get(kind, 0) + count(match.group())  # type: ignore[operator]
    return tuple(totals.items())


def kinds_of(texts: Iterable[str]) -> frozenset[Kind]:
    """The kinds of text in ``texts``."""
    return frozenset(kind for text in texts for kind in kind_tokens(text))


def request_kinds(counted: int, texts: Iterable[str]) -> dict[Kind, int]:
    """A request's ``counted`` local tokens by kind: its texts' kinds, the framing tokens as
    Latin."""
    by_kind: dict[Kind, int] = {}
    for text in texts:
        for kind, tokens in kind_tokens(text).items():
            by_kind[kind] = by_kind.get(kind, 0) + tokens
    by_kind["latin"] = max(0, counted - by_kind.get("cjk", 0) - by_kind.get("other", 0))
    return by_kind


@dataclass(frozen=True)
class Calibration:
    """The server-to-local token ratios a memory plans with, per kind of text.

    ``exact`` means the server counts with o200k_base: the ratio stays 1 and reports do
    not move it. Otherwise each kind's ratio is ``WORST_KNOWN_RATIO`` until the server has
    counted a request where that kind held ``MIN_SHARE``, then the highest ratio learned for
    it (``learned``) times ``LEARNED_SLACK``. ``ratio``, the one a plan uses, is the highest
    ratio among the kinds the conversation holds (``seen``; Latin at least, for the
    instructions). ``reports`` is how many server counts taught it.
    """

    exact: bool = True
    learned: tuple[tuple[Kind, float], ...] = ()
    seen: frozenset[Kind] = frozenset({"latin"})
    reports: int = 0

    def kind_ratio(self, kind: Kind) -> float:
        """The planning ratio of one kind of text."""
        if self.exact:
            return 1.0
        learned = dict(self.learned).get(kind)
        return WORST_KNOWN_RATIO[kind] if learned is None else max(1.0, learned) * LEARNED_SLACK

    @property
    def ratio(self) -> float:
        return max(self.kind_ratio(kind) for kind in self.seen | {"latin"})

    def mix_ratio(self, kinds: Mapping[Kind, int]) -> float:
        """The planning ratio of text made of ``kinds`` (local tokens by kind): each kind at its own
        ratio."""
        total = sum(kinds.values())
        if self.exact or total <= 0:
            return self.ratio if not self.exact else 1.0
        return sum(tokens * self.kind_ratio(kind) for kind, tokens in kinds.items()) / total

    def seeing(self, texts: Iterable[str]) -> Calibration:
        """This calibration, with the kinds of ``texts`` among those the conversation holds."""
        if self.exact:
            return self
        seen = self.seen | kinds_of(texts)
        return (
            self if seen == self.seen else Calibration(self.exact, self.learned, seen, self.reports)
        )

    def learn(
        self, counted: int, reported: int, kinds: Mapping[Kind, int] | None = None
    ) -> Calibration:
        """This calibration after the server counted ``reported`` tokens for ``counted`` local ones.

        ``kinds`` splits ``counted`` by kind (``request_kinds``); without it the request is taken as
        Latin. Each kind holding ``MIN_SHARE`` learns the ratio left for it once the other kinds are
        credited at their ``BEST_KNOWN_RATIO``, an upper bound of its own. Implausible reports (see
        ``implausible``) and exact servers change nothing.
        """
        if self.exact or counted <= 0 or implausible(counted, reported):
            return self
        kinds = dict(kinds) if kinds else {"latin": counted}
        learned = dict(self.learned)
        for kind, tokens in kinds.items():
            if tokens <= 0 or tokens < MIN_SHARE * counted:
                continue
            others = sum(BEST_KNOWN_RATIO[k] * t for k, t in kinds.items() if k != kind)
            ratio = (reported - others) / tokens
            learned[kind] = ratio if kind not in learned else max(learned[kind], ratio)
        ordered = tuple((kind, learned[kind]) for kind in KINDS if kind in learned)
        return Calibration(
            False, ordered, self.seen | {k for k, t in kinds.items() if t > 0}, self.reports + 1
        )

    def local_within(self, server_tokens: int) -> int:
        """The most local tokens that stay within ``server_tokens`` by the server's count."""
        return math.floor(server_tokens / self.ratio)

    def server_estimate(self, local_tokens: int) -> int:
        """What ``local_tokens`` are expected to cost by the server's count."""
        return math.ceil(local_tokens * self.ratio)
