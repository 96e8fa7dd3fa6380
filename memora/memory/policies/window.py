"""The article's window: every pair beyond the last ``max_recent_turns`` leaves, then whatever the
budget needs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memora.memory.values import FoldReason
from memora.text.tokens import count_message


@dataclass(frozen=True)
class Window:
    name: str = "window"

    def first_fold(
        self,
        unfolded: Sequence[int],
        size: Callable[[int], int],
        budget: int,
        older: int,
    ) -> tuple[int, FoldReason]:
        """The pairs older than the recent window; none while the window holds them all."""
        return (older, "window") if older else (0, "none")

    def expected_message(self, user_messages: Sequence[int]) -> int:
        """The shortest possible message: whatever the next message is, what it folds is folded
        anyway."""
        return count_message("user", "")

    def certain_fold(self, expected: int, shortest: int, older: int) -> int:
        """All of it: planned for the shortest message, the fold is certain."""
        return expected


POLICY = Window()
