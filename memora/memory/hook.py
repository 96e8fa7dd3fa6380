"""A hook the memory calls after each change worth keeping: a committed turn, a fold.

The memory knows nothing of where it is kept; the page sets ``on_change`` to save it. The hook
runs in whatever thread made the change, under the memory's lock (so it sees a consistent state),
and must not raise: a failed save is the saver's to report and retry, never a reason to undo a
turn that the model has already answered and billed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

Change = Literal["turn", "fold"]
OnChange = Callable[[Any, Change], None]
"""``on_change(memory, change)``."""
