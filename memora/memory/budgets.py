"""The budget in force, in the server's tokens and in the local tokens a plan counts: what the
server's window leaves beside the largest output, what the calibration makes of it, what an overflow
error teaches, and the error when even the smallest request is over.

Pure: ``ServerKnowledge`` (``server``) keeps what was learned and applies these rules to it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from memora.memory.backend import ContextOverflowError
from memora.memory.values import ContextBudgetError
from memora.text.calibration import Calibration, Kind, kind_tokens, request_kinds


def budget_in_force(max_input_tokens: int, server_window: int | None, output: int) -> int:
    """``max_input_tokens``, or less when the server's context window leaves less room beside the
    largest ``output``."""
    if server_window is None:
        return max_input_tokens
    return max(1, min(max_input_tokens, server_window - output))


def window_too_small(server_window: int | None, output: int) -> bool:
    """Whether the server's context window, learned from an overflow error, cannot hold even the
    largest ``output``: no fold or cut can make a request fit it, and only a setting can."""
    return server_window is not None and server_window <= output


def local_budget(calibration: Calibration, budget: int, texts: Sequence[str] | None = None) -> int:
    """``budget`` in local tokens, as the calibration makes it hold by the server's count.

    Without ``texts``, every local token is planned at the highest ratio among the kinds of text
    seen: a plan must hold whatever share of Chinese the request ends up with. Where the server
    counts each request before it is sent, that count holds the budget and the plan only has to be
    close: ``texts`` are what a request may carry (instructions, summary, unfolded messages), and
    each kind's ratio is weighed by its share of them, so that English instructions are not planned
    as Chinese.
    """
    if texts is None:
        return calibration.local_within(budget)
    kinds: dict[Kind, int] = {}
    for text in texts:
        for kind, tokens in kind_tokens(text).items():
            kinds[kind] = kinds.get(kind, 0) + tokens
    return math.floor(budget / calibration.mix_ratio(kinds))


def overflow_learned(
    overflow: ContextOverflowError,
    local: int,
    calibration: Calibration,
    window: int | None,
    texts: Sequence[str],
) -> tuple[Calibration, int | None]:
    """The calibration and server window after a context-overflow error on a request of ``local``
    tokens and ``texts``."""
    if overflow.prompt_tokens is not None:
        calibration = calibration.learn(local, overflow.prompt_tokens, request_kinds(local, texts))
    if overflow.window is not None:
        window = overflow.window if window is None else min(window, overflow.window)
    elif overflow.prompt_tokens is None:
        # No figure at all: plan as if the server counted a quarter more than the margin did.
        calibration = calibration.learn(
            local, math.ceil(calibration.server_estimate(local) * 1.25), request_kinds(local, texts)
        )
    return calibration, window


def budget_error(
    calibration: Calibration, local_tokens: int, exact: int | None, budget: int
) -> ContextBudgetError:
    """The smallest request is over ``budget``: by the server's ``exact`` count, else by the
    calibration's estimate."""
    return ContextBudgetError(
        exact if exact is not None else calibration.server_estimate(local_tokens), budget
    )
