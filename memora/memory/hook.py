"""The seams the app installs on a memory: the hook it calls after each change worth keeping, and
the caps it asks.

``on_change``: the hook the memory calls after each change worth keeping: a committed turn, a fold.

The memory knows nothing of where it is kept; the page sets ``on_change`` to save it. The hook
runs in whatever thread made the change, under the memory's lock (so it sees a consistent state),
and must not raise: a failed save is the saver's to report and retry, never a reason to undo a
turn that the model has already answered and billed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

Change = Literal["turn", "fold"]
OnChange = Callable[[Any, Change], None]
"""``on_change(memory, change)``."""


class Caps(Protocol):
    """A classroom's caps on one session, asked before anything is kept or sent (the app installs
    ``memora.classroom.limits.SessionLimits``, which the lead moves to the classroom; a bare memory
    has none). Each check raises a ValueError that says which cap refused, and returns None when
    every cap allows."""

    def check(self, text: str, finished_turns: int, session_tokens: int) -> None:
        """A new message of ``text`` after ``finished_turns`` turns that spent
        ``session_tokens``."""

    def check_spend(self, finished_turns: int, session_tokens: int) -> None:
        """Any further request (a fold ahead asks this): the turn and token caps only."""
