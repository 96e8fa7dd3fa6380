"""The budget rule, as pure functions: what a request sends, and what must be folded first.

Everything here works on token counts alone (no messages, no model, no state),
so a student can read the algorithm in one place and a test can check it with
plain numbers. ``ShortTermMemory`` calls ``plan_context`` before every reply
(``prepare``), between turns (``fold_due``/``prefold``) and for a new message
(``check_new_message``), and ``fold_pieces`` to split a fold into requests that fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memora.memory.values import FoldPolicy
from memora.tokens import count_message

FoldReason = Literal["none", "window", "budget", "batch", "high_water"]

HIGH_WATER_TOKENS = 1000
"""The watermark policy's high-water mark, in local tokens, when the budget allows more: past it, a bigger
window costs more input than the summaries it saves (``python -m memora.bench --peers``: at a 4,000-token
budget, 0.62x the window policy's cost with it, 1.06x with the budget as the mark)."""

LOW_WATER_SHARE = 0.6
"""The watermark policy folds down to this share of its high-water mark, so that the next folds are turns away."""


@dataclass(frozen=True)
class Plan:
    """What one reply request will send.

    ``fold`` is how many of the unfolded messages (whole pairs, oldest first)
    must be folded into the summary before sending; the rest are sent verbatim.
    ``reason`` says why the last of them had to go: ``window`` (they left the
    recent window), ``budget`` (the window alone did not fit), ``batch`` (a
    batched fold took the whole batch), ``high_water`` (the watermark policy's
    request would have passed the budget), or ``none``. ``input_tokens`` is the
    planned size of the request, with a full-length summary reserved when
    anything is folded; ``fits`` is False when it exceeds ``budget`` even with
    everything folded.
    """

    fold: int
    reason: FoldReason
    input_tokens: int
    budget: int

    @property
    def fits(self) -> bool:
        return self.input_tokens <= self.budget


def plan_context(
    unfolded: Sequence[int],
    *,
    message: int,
    fixed: int,
    summary: int,
    full_summary: int,
    budget: int,
    max_recent_turns: int,
    fold_batch_turns: int = 0,
) -> Plan:
    """Plans a request from token counts, so that it fits the budget.

    ``unfolded`` are the tokens of each completed message not yet folded (whole
    pairs, oldest first); ``message`` those of the current user message;
    ``fixed`` those of the instructions and the reply's priming; ``summary``
    those of the summary as it is, ``full_summary`` those of a summary at its
    full allowed length. The request must satisfy the budget inequality

        fixed + summary' + sum(unfolded[fold:]) + message <= budget

    where summary' is ``summary`` when nothing is folded and ``full_summary``
    otherwise (the new summary's length is not known before it is written).
    First the pairs beyond ``max_recent_turns`` leave (once the window has
    grown ``fold_batch_turns`` pairs past it); then, while the inequality
    fails, the oldest remaining pair leaves. With batching, a fold always takes
    the window back to ``max_recent_turns``, so folds come in large steps.
    """
    window = 2 * max_recent_turns
    fold, reason = 0, "none"
    if len(unfolded) > window + 2 * fold_batch_turns:
        fold, reason = len(unfolded) - window, "window"
    sent = sum(unfolded[fold:])

    def size() -> int:
        return fixed + (full_summary if fold else summary) + sent + message

    while size() > budget and fold < len(unfolded):
        sent -= unfolded[fold] + unfolded[fold + 1]
        fold, reason = fold + 2, "budget"
    if fold_batch_turns and 0 < fold < len(unfolded) - window:
        sent, fold, reason = sum(unfolded[len(unfolded) - window :]), len(unfolded) - window, "batch"
    return Plan(fold, reason, size(), budget)


def plan_watermark(
    unfolded: Sequence[int],
    *,
    message: int,
    fixed: int,
    summary: int,
    full_summary: int,
    budget: int,
    max_recent_turns: int,
    high_water: int,
    low_water: int,
) -> Plan:
    """The watermark policy: fewer, larger folds, under the same budget inequality as ``plan_context``.

    Nothing is folded while the request fits ``high_water`` (never above the
    budget), however many turns the window holds. When it would not, the
    oldest pairs are folded until the request is down to ``low_water``,
    keeping at least ``max_recent_turns`` pairs verbatim, unless the budget
    itself needs them to go. Each fold then buys several turns before the
    next, so a conversation pays for far fewer summaries, whose output tokens
    are the dearest. ``watermarks`` gives the marks the memory uses.
    """
    window, fold, sent = 2 * max_recent_turns, 0, sum(unfolded)

    def size() -> int:
        return fixed + (full_summary if fold else summary) + sent + message

    if size() <= min(high_water, budget):
        return Plan(0, "none", size(), budget)
    while fold < len(unfolded) and (size() > budget or (size() > low_water and len(unfolded) - fold > window)):
        sent -= unfolded[fold] + unfolded[fold + 1]
        fold += 2
    return Plan(fold, "high_water", size(), budget)


def plan_folds(policy: FoldPolicy, unfolded: Sequence[int], *, fold_batch_turns: int = 0, **sizes: int) -> Plan:
    """``plan_watermark`` (with its ``watermarks``) or ``plan_context``, by ``policy``."""
    if policy == "watermark":
        window = sum(unfolded[max(0, len(unfolded) - 2 * sizes["max_recent_turns"]) :])
        kept = sizes["fixed"] + sizes["full_summary"] + window + sizes["message"]
        high, low = watermarks(sizes["budget"], kept)
        return plan_watermark(unfolded, **sizes, high_water=high, low_water=low)
    return plan_context(unfolded, **sizes, fold_batch_turns=fold_batch_turns)


def watermarks(budget: int, kept: int) -> tuple[int, int]:
    """The watermark policy's high- and low-water marks, for a request of ``kept`` tokens after a full fold.

    ``kept`` is the request with only the recent window verbatim and a full-length
    summary. The high-water mark is ``HIGH_WATER_TOKENS``, raised to leave the
    window room to grow when the window alone is near it (else every turn would
    fold), and never above the budget; the low-water mark is ``LOW_WATER_SHARE``
    of it.
    """
    room = int(HIGH_WATER_TOKENS * (1 - LOW_WATER_SHARE))
    high = min(budget, max(HIGH_WATER_TOKENS, kept + room))
    return high, int(high * LOW_WATER_SHARE)


def expected_message(policy: FoldPolicy, user_messages: Sequence[int]) -> int:
    """The tokens of the next message to plan a fold for before it arrives (a prefold).

    The window policy plans for the shortest possible message, so what it folds is
    certain to be folded. The watermark policy plans for a message as long as the
    longest of ``user_messages`` (those in the window): it folds down to its
    low-water mark anyway, so folding a turn early costs nothing and keeps the
    fold off the reply's path.
    """
    shortest = count_message("user", "")
    return max(user_messages, default=shortest) if policy == "watermark" else shortest


def fold_pieces(pairs: Sequence[int], room: int) -> list[int]:
    """How many pairs each summary request folds, oldest first, so that each fits ``room``.

    ``pairs`` are the tokens of each pair to fold. Consecutive pairs share a
    request while their total fits ``room``; a pair larger than ``room`` goes
    alone (its messages are then cut to fit). Returns ``[]`` for no pairs.
    """
    pieces: list[int] = []
    size = room + 1
    for tokens in pairs:
        if pieces and size + tokens <= room:
            pieces[-1] += 1
            size += tokens
        else:
            pieces.append(1)
            size = tokens
    return pieces
