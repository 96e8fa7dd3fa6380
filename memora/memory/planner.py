"""The budget rule, as pure functions: what a request sends, and what must be folded first.

Everything here works on token counts alone (no messages, no model, no state),
so a student can read the algorithm in one place and a test can check it with
plain numbers. The article's rule is ``plan_context``; ``plan_watermark`` is the
other fold policy, under the same budget inequality. Their one caller is
``ShortTermMemory.plan`` (through ``plan_folds``), before every reply; folding
ahead between turns is ``prefold``, splitting a fold into requests is
``summarizer.fold_pieces``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memora.memory.values import FoldPolicy

FoldReason = Literal["none", "window", "budget", "batch", "high_water"]

WATERMARK_ROOM = 600
"""How far, in local tokens, the watermark policy lets a request grow past its window-only size before it folds.

Each fold then takes about this many tokens of older pairs at once. Measured with ``python -m benchmarks.memory
--peers``: more room sends more input on every turn than the fewer summaries save; less room folds more often."""


@dataclass(frozen=True)
class Plan:
    """What one reply request will send.

    ``fold`` is how many of the unfolded messages (whole pairs, oldest first)
    must be folded into the summary before sending; the rest are sent verbatim.
    ``reason`` says why the last of them had to go: ``window`` (they left the
    recent window), ``budget`` (the window alone did not fit), ``batch`` (a
    batched fold took the whole batch), ``high_water`` (the watermark policy's
    request would have passed its high-water mark), or ``none``. ``input_tokens`` is the
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
    room: int = WATERMARK_ROOM,
) -> Plan:
    """The watermark policy: fewer, larger folds, under the same budget inequality as ``plan_context``.

    The high-water mark is the request with only the recent window verbatim
    (``max_recent_turns`` pairs, a full-length summary and the message) plus
    ``room``, never above the budget. Nothing is folded while the request
    fits it, however many pairs the window holds. When it would not, every
    pair older than the recent window is folded at once; pairs of the recent
    window are folded only while the request is still over the budget, so
    they stay verbatim whenever they fit beside this message (the article's
    guarantee). Each fold then buys several turns before the next, so a
    conversation pays for far fewer summaries, whose output tokens are the
    dearest.
    """
    older = max(0, len(unfolded) - 2 * max_recent_turns)
    high = min(budget, fixed + full_summary + sum(unfolded[older:]) + message + room)
    fold, sent = 0, sum(unfolded)

    def size() -> int:
        return fixed + (full_summary if fold else summary) + sent + message

    if size() <= high:
        return Plan(0, "none", size(), budget)
    fold, sent, reason = older, sent - sum(unfolded[:older]), "high_water"
    while size() > budget and fold < len(unfolded):
        sent -= unfolded[fold] + unfolded[fold + 1]
        fold, reason = fold + 2, "budget"
    return Plan(fold, reason if fold else "none", size(), budget)


def plan_folds(policy: FoldPolicy, unfolded: Sequence[int], *, fold_batch_turns: int = 0, **sizes: int) -> Plan:
    """``plan_watermark`` or ``plan_context``, by ``policy``."""
    if policy == "watermark":
        return plan_watermark(unfolded, **sizes)
    return plan_context(unfolded, **sizes, fold_batch_turns=fold_batch_turns)
