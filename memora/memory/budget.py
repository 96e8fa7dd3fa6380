"""The budget in force, in the server's tokens and in the local tokens a plan counts, and what the server teaches.

Budgets are the server's tokens; plans count local o200k_base tokens. A ``Calibration`` learns the gap from what the
server itself counts: its tokenizer endpoint, where it has one (``exact_count``), the usage it reports, and the
figures of a context-overflow error (``overflow_learned``), which may also give the server's context window, which
then lowers the budget (``budget_in_force``). Pure functions: the memory keeps the calibration and the window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from memora.memory.backend import Backend, BackendError, ContextOverflowError
from memora.memory.values import ContextBudgetError
from memora.messages import Message
from memora.tokens.calibration import Calibration, Kind, kind_tokens, request_kinds

T = TypeVar("T")


def budget_in_force(max_input_tokens: int, server_window: int | None, output: int) -> int:
    """``max_input_tokens``, or less when the server's context window leaves less room beside the largest ``output``."""
    if server_window is None:
        return max_input_tokens
    return max(1, min(max_input_tokens, server_window - output))


def window_too_small(server_window: int | None, output: int) -> bool:
    """Whether the server's context window, learned from an overflow error, cannot hold even the largest ``output``:
    no fold or cut can make a request fit it, and only a setting can."""
    return server_window is not None and server_window <= output


def local_budget(calibration: Calibration, budget: int, texts: Sequence[str] | None = None) -> int:
    """``budget`` in local tokens, as the calibration makes it hold by the server's count.

    Without ``texts``, every local token is planned at the highest ratio among the kinds of text seen: a plan must
    hold whatever share of Chinese the request ends up with. Where the server counts each request before it is sent,
    that count holds the budget and the plan only has to be close: ``texts`` are what a request may carry
    (instructions, summary, unfolded messages), and each kind's ratio is weighed by its share of them, so that
    English instructions are not planned as Chinese.
    """
    if texts is None:
        return calibration.local_budget(budget)
    kinds: dict[Kind, int] = {}
    for text in texts:
        for kind, tokens in kind_tokens(text).items():
            kinds[kind] = kinds.get(kind, 0) + tokens
    return math.floor(budget / calibration.mix_ratio(kinds))


def exact_source(backend: Backend, model: str, calibration: Calibration) -> str | None:
    """The server's tokenizer endpoint that counts each request (``"llama.cpp /apply-template + /tokenize"``), or None;
    None too where local counts are the server's own (o200k_base)."""
    return None if calibration.exact else backend.counting_source(model)


def exact_counter(backend: Backend, calibration: Calibration) -> Callable[[str, str, Sequence[Message]], int | None] | None:
    """The backend's ``count_request(model, instructions, messages)``, a capability every backend declares; None where
    the local count is already exact (o200k_base is the server's tokenizer)."""
    return None if calibration.exact else backend.count_request


def counting_words(source: str | None, calibration: Calibration, offline: bool = False) -> str:
    """Which count the budget uses, in words, for the REPL; ``offline``: the offline engine, no server behind it."""
    if offline:
        return "local o200k_base (offline: nothing is billed)"
    if source is not None:
        return f"the server's tokenizer, exact ({source})"
    if calibration.exact:
        return "local o200k_base, the server's own tokenizer: exact"
    return "local, with a learned margin"


def overflow_learned(
    overflow: ContextOverflowError, local: int, calibration: Calibration, window: int | None, texts: Sequence[str]
) -> tuple[Calibration, int | None]:
    """The calibration and server window after a context-overflow error on a request of ``local`` tokens and ``texts``."""
    if overflow.prompt_tokens is not None:
        calibration = calibration.learn(local, overflow.prompt_tokens, request_kinds(local, texts))
    if overflow.window is not None:
        window = overflow.window if window is None else min(window, overflow.window)
    elif overflow.prompt_tokens is None:
        # No figure at all: plan as if the server counted a quarter more than the margin did.
        calibration = calibration.learn(local, math.ceil(calibration.server_estimate(local) * 1.25), request_kinds(local, texts))
    return calibration, window


def retry_on_overflow(send: Callable[[], T], learn: Callable[[ContextOverflowError], None], too_small: Callable[[], bool]) -> T:
    """``send()``; after a context-overflow error, ``learn``s its figures and sends once more, cut to the room they
    leave. Raises ``overflow_error()`` when ``too_small()`` after learning, or on a second overflow."""
    try:
        return send()
    except ContextOverflowError as overflow:
        learn(overflow)
    if too_small():
        raise overflow_error()
    try:
        return send()
    except ContextOverflowError:
        raise overflow_error() from None


def overflow_error() -> BackendError:
    """The error for a server whose context window no fold or cut can fit: only a setting can."""
    return BackendError(
        "The model server's context window is smaller than Memora's budget, even after folding and cutting to the "
        "figures it gave. Lower MEMORA_MAX_INPUT_TOKENS or set MEMORA_CONTEXT_WINDOW to the server's context size "
        "(llama.cpp: --n_ctx). Your message is kept."
    )


def budget_error(calibration: Calibration, local_tokens: int, exact: int | None, budget: int) -> ContextBudgetError:
    """The smallest request is over ``budget``: by the server's ``exact`` count, else by the calibration's estimate."""
    return ContextBudgetError(exact if exact is not None else calibration.server_estimate(local_tokens), budget)
