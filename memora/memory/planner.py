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

FoldReason = Literal["none", "window", "budget", "batch"]


@dataclass(frozen=True)
class Plan:
    """What one reply request will send.

    ``fold`` is how many of the unfolded messages (whole pairs, oldest first)
    must be folded into the summary before sending; the rest are sent verbatim.
    ``reason`` says why the last of them had to go: ``window`` (they left the
    recent window), ``budget`` (the window alone did not fit), ``batch`` (a
    batched fold took the whole batch), or ``none``. ``input_tokens`` is the
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
