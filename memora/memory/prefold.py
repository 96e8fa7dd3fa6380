"""Folding ahead: what a prefold may fold between turns, before the next message is known.

After a reply, the page and the REPL fold what the next turn is certain to fold, so that
its reply waits for no summary. The next message is not known yet: ``expected_message`` says
which message to plan for, and ``certain_fold`` how much of that plan may be folded now.
Pure functions of token counts, like the planner they call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import median_low

from memora.memory.planner import Plan
from memora.memory.values import FoldPolicy
from memora.tokens import count_message


def prefold_plan(
    policy: FoldPolicy, unfolded: Sequence[int], message: int, plan: Callable[[int], Plan], max_recent_turns: int
) -> tuple[int, Plan]:
    """How many of the ``unfolded`` messages a prefold folds now, and the plan for the expected ``message``.

    ``unfolded`` are the tokens of each finished message not yet folded; ``message`` is
    ``expected_message``'s tokens; ``plan(tokens)`` is the fold policy's plan for a message of that size.
    Returns 0 (with the expected plan) when nothing is due.
    """
    expected = plan(message)
    if not expected.fold:  # certain_fold never folds more than the expected plan: most turns stop here
        return 0, expected
    shortest = plan(expected_message("window", ()))
    return certain_fold(policy, expected, shortest, max(0, len(unfolded) - 2 * max_recent_turns)), expected


def certain_fold(policy: FoldPolicy, expected: Plan, shortest: Plan, older: int) -> int:
    """How many messages a prefold may fold before the next message is known.

    ``expected`` is the plan for ``expected_message``, ``shortest`` for the
    shortest possible message, ``older`` the unfolded messages older than the
    recent window. Under the watermark, the expected message decides whether to
    fold, but only pairs older than the window go, and window pairs only when
    even the shortest message needs them gone: the real message decides the rest,
    so the window stays verbatim whenever it fits beside it.
    """
    if policy != "watermark":
        return expected.fold
    return min(expected.fold, max(older, shortest.fold))


def expected_message(policy: FoldPolicy, user_messages: Sequence[int]) -> int:
    """The tokens of the next message to plan a fold for before it arrives (a prefold).

    The window policy plans for the shortest possible message, so what it folds is
    certain to be folded. The watermark policy plans for a message of the median
    length of ``user_messages`` (those not yet folded): a typical next message
    decides whether the fold is due now, so most folds happen off the reply's
    path without folding turns early for a rare long message (``certain_fold``
    limits what such a fold may take).
    """
    shortest = count_message("user", "")
    return int(median_low(user_messages)) if policy == "watermark" and user_messages else shortest
