"""The watermark: fewer, larger folds, under the same budget inequality as the window."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median_low

from memora.memory.values import FoldReason
from memora.text.tokens import count_message


@dataclass(frozen=True)
class Watermark:
    """The high-water mark is the budget itself: nothing is folded while the request fits it,
    however many pairs the window holds. When it would not, every pair older than the recent window
    (``max_recent_turns`` pairs) is folded at once, down to the low-water mark; pairs of the recent
    window are folded only while the request is still over the budget, so they stay verbatim
    whenever they fit beside the message (the article's guarantee). Each fold then buys several
    turns before the next, so a conversation pays for far fewer summaries, whose output tokens are
    the dearest, and a larger budget keeps more turns verbatim: it is spent on remembering.
    """

    name: str = "watermark"

    def first_fold(
        self,
        unfolded: Sequence[int],
        size: Callable[[int], int],
        budget: int,
        older: int,
    ) -> tuple[int, FoldReason]:
        if size(0) <= budget:
            return 0, "none"
        return older, "high_water"

    def expected_message(self, user_messages: Sequence[int]) -> int:
        """A message of the median length of ``user_messages``: a typical next message decides
        whether the fold is due now, so most folds happen off the reply's path without folding early
        for a rare long message."""
        return int(median_low(user_messages)) if user_messages else count_message("user", "")

    def certain_fold(self, expected: int, shortest: int, older: int) -> int:
        """Only pairs older than the window, and window pairs only when even the shortest message
        needs them gone: the real message decides the rest, so the window stays verbatim whenever it
        fits beside it."""
        return min(expected, max(older, shortest))


POLICY = Watermark()
