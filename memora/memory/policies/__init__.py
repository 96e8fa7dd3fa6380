"""Fold policies: what a policy folds before the budget is checked, one object per file, in one
registry.

The budget rule is the same for every policy (``memora.memory.plan.plan_turn``); a policy only says
what it folds anyway (``first_fold``), which message a fold ahead plans for (``expected_message``),
and how much of that plan may be folded before the message is known (``certain_fold``). Each module
of this package defines one ``POLICY``; the registry finds them, so adding a policy is one new file
here plus its catalog strings (``policy.<name>``, ``policy.<name>_caption``, ``policy.<name>_note``,
``whatif.<name>`` in both locales). The settings choices, the saved file's schema, the page's radio,
the what-if columns and the bench all read ``names()``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from typing import Protocol

from memora.memory.values import FoldReason

DEFAULT = "window"
"""The article's own policy: the page, the REPL and the article's constructor start with it."""


class Policy(Protocol):
    """A fold policy. ``name`` is its setting's value (``MEMORA_FOLD_POLICY``) and its catalog
    key."""

    name: str

    def first_fold(
        self,
        unfolded: Sequence[int],
        size: Callable[[int], int],
        budget: int,
        older: int,
    ) -> tuple[int, FoldReason]:
        """How many of the ``unfolded`` messages' tokens (whole pairs, oldest first) the policy
        folds before the budget is checked, and why; ``size(fold)`` is the request's tokens once
        ``fold`` messages have left, ``older`` how many are older than the recent window
        (``memora.memory.plan.older_than_window``)."""
        ...

    def expected_message(self, user_messages: Sequence[int]) -> int:
        """The tokens of the message a fold ahead plans for, from the unfolded ``user_messages``'
        tokens."""
        ...

    def certain_fold(self, expected: int, shortest: int, older: int) -> int:
        """How much a fold ahead may fold now: ``expected`` and ``shortest`` are the folds planned
        for the expected and the shortest possible message, ``older`` the unfolded messages older
        than the recent window."""
        ...


def _discover() -> dict[str, Policy]:
    found: dict[str, Policy] = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: (m.name != DEFAULT, m.name)):
        policy: Policy = importlib.import_module(f"{__name__}.{module.name}").POLICY
        found[policy.name] = policy
    return found


POLICIES: dict[str, Policy] = _discover()
"""Every fold policy by name, the default first."""


def names() -> tuple[str, ...]:
    """The registered policies' names, the default first: the settings' choices and the page's
    radio, in order."""
    return tuple(POLICIES)


def policy(name: str) -> Policy:
    """The policy called ``name``. Raises ValueError, naming the choices, for an unknown one."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown fold policy {name!r}; choose one of {', '.join(names())}"
        ) from None
