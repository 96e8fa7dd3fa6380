"""The plan: one pure function, ``plan_turn``, decides every request a turn makes.

It works on token counts alone (no messages, no model, no state), so a student can read the article's rule in one
place and test it with plain numbers. Everything that sends a request asks it: the memory before each reply
(``ShortTermMemory.prepare``) and between turns (``ShortTermMemory.prefold``, the fold ahead), the what-if replay
(``memora.memory.replay``) and the bench, through the memory. What a fold policy adds to the rule is its own object
(``memora.memory.policies``); the budget inequality is the same for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memora.memory.policies import FoldReason, Policy
from memora.prompts import SUMMARY_PREAMBLE
from memora.tokens import count_message


@dataclass(frozen=True)
class PlanSizes:
    """The local token sizes a plan weighs besides the conversation.

    ``fixed``: the instructions and the reply's priming. ``full_summary``: a summary message at its full allowed
    length, reserved whenever a fold writes a new summary (its length is not known before it is written).
    ``fold_room``: what one summary request has for the messages it folds. ``budget``: the local input budget.
    """

    fixed: int
    full_summary: int
    fold_room: int
    budget: int


@dataclass(frozen=True)
class TurnPlan:
    """What one request will send, and what must be folded into the summary first.

    ``fold`` is how many of the unfolded messages (whole pairs, oldest first) are folded before sending; ``pieces``
    how many pairs each of its summary requests takes (``fold_pieces``: empty when nothing folds). ``reason`` says
    why the last of them had to go (``FoldReason``; ``none`` when nothing folds). ``input_tokens`` is the planned
    size of the request, with a full-length summary reserved when anything folds, against ``budget``. ``alone`` is
    the instructions with the message and nothing else: the smallest request that could carry it. ``message`` is
    the message planned for: the real one, or before it is known (a fold ahead), the one its policy expects.
    """

    fold: int
    pieces: tuple[int, ...]
    reason: FoldReason
    input_tokens: int
    budget: int
    alone: int
    message: int

    @property
    def fits(self) -> bool:
        """Whether the planned request fits the budget (False only when even folding everything cannot make it)."""
        return self.input_tokens <= self.budget

    @property
    def message_fits(self) -> bool:
        """Whether the message fits beside the instructions at all; when it does not, no fold can help."""
        return self.alone <= self.budget


def plan_turn(
    unfolded: Sequence[int],
    *,
    message: int | None,
    summary: int,
    sizes: PlanSizes,
    policy: Policy,
    max_recent_turns: int,
    at_least: int = 0,
) -> TurnPlan:
    """Plans a request from token counts, so that it fits the budget: the article's rule.

    ``unfolded`` are the tokens of each finished message not yet folded (whole pairs, oldest first); ``message``
    those of the current user message, or None between turns (a fold ahead: the policy's expected message decides,
    and only what is certain to fold whatever the message is folds now); ``summary`` those of the summary message as
    it is (0 for none). The request must satisfy the budget inequality

        fixed + summary' + sum(unfolded[fold:]) + message <= budget

    where summary' is ``summary`` when nothing is folded and ``full_summary`` otherwise. First the policy folds what
    it folds anyway (the window: every pair beyond the last ``max_recent_turns``); then, while the inequality fails,
    the oldest remaining pair leaves. ``at_least`` is, whatever the counts say, the fewest messages to fold (the
    server counted the request and disagreed, so one more pair leaves). When
    everything is folded and the request still does not fit, the plan says so (``fits`` is False); it never raises.
    """
    expected = policy.expected_message(unfolded[::2]) if message is None else message
    plan = _rule(unfolded, expected, summary, sizes, policy, max_recent_turns, at_least)
    if message is None and plan.fold:
        shortest = _rule(unfolded, SHORTEST_MESSAGE, summary, sizes, policy, max_recent_turns, 0)
        older = max(0, len(unfolded) - 2 * max_recent_turns)
        certain = policy.certain_fold(plan.fold, shortest.fold, older)
        return TurnPlan(certain, fold_pieces(_pairs(unfolded, certain), sizes.fold_room), *_tail(plan))
    return plan


SHORTEST_MESSAGE = count_message("user", "")
"""The tokens of the shortest possible message: what a fold ahead under the article's window plans for."""


def _rule(
    unfolded: Sequence[int], message: int, summary: int, sizes: PlanSizes, policy: Policy, recent: int, at_least: int
) -> TurnPlan:
    def size(fold: int) -> int:
        return sizes.fixed + (sizes.full_summary if fold else summary) + sum(unfolded[fold:]) + message

    fold, reason = policy.first_fold(unfolded, size, sizes.budget, recent)
    if fold < at_least:
        fold, reason = min(at_least, len(unfolded)), "budget"
    while size(fold) > sizes.budget and fold < len(unfolded):
        fold, reason = fold + 2, "budget"
    reason = reason if fold else "none"
    pieces = fold_pieces(_pairs(unfolded, fold), sizes.fold_room)
    return TurnPlan(fold, pieces, reason, size(fold), sizes.budget, sizes.fixed + message, message)


def _pairs(unfolded: Sequence[int], fold: int) -> list[int]:
    return [unfolded[i] + unfolded[i + 1] for i in range(0, fold, 2)]


def _tail(plan: TurnPlan) -> tuple[FoldReason, int, int, int, int]:
    return plan.reason, plan.input_tokens, plan.budget, plan.alone, plan.message


def fold_pieces(pairs: Sequence[int], room: int) -> tuple[int, ...]:
    """How many pairs each summary request folds, oldest first, so that each fits ``room``.

    ``pairs`` are the tokens of each pair to fold. Consecutive pairs share a request while their total fits
    ``room``; a pair larger than ``room`` goes alone (its messages are then cut to fit). ``()`` for no pairs.
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
    return tuple(pieces)


def summary_tokens(summary: str) -> int:
    """The local tokens of the summary message that carries ``summary`` (preamble included); 0 for no summary.

    The one count of a summary message: the memory's plan, the replay and the Status panel all use it."""
    return count_message("developer", SUMMARY_PREAMBLE + summary) if summary else 0
