"""The short-term memory: the article's ``ShortTermMemory`` and the pieces it is made of.

Read in this order:

1. ``plan``: the lesson's rule, pure. ``plan_turn`` decides every request (what folds, in how many
   summary requests, what is sent, what a fold ahead does) from token counts, with the budget
   inequality in its docstring; ``History`` is the conversation as a value, ``Sizes`` the fixed
   parts of every request.
2. ``policies``: what a fold policy adds to the rule, one object per file (``window``, the
   article's; ``watermark``).
3. ``core``: ``ShortTermMemory``, the state and the I/O: a turn (``Turn``) asks the plan, folds,
   sends, and commits or leaves no trace. Nothing else writes its state.
4. ``server``: what the memory knows of its model server (``ServerKnowledge``: the backend, and
   what its own counts teach), and one summary request, bounded both ways (``Summarizer``).
   ``backend``: what the memory asks of a model server (the ``Backend`` Protocol the backends
   implement, and Memora's own errors). ``values``: limits, errors and frozen values; ``hook``: the
   seams the app installs (``on_change``, the classroom's caps).
"""

from memora.memory.core import ShortTermMemory, Turn
from memora.memory.plan import PlanSizes, TurnPlan, fold_pieces, plan_turn
from memora.memory.server import whole_sentences
from memora.memory.values import (
    DEFAULT_MODEL,
    MAX_INPUT_TOKENS,
    MAX_RECENT_TURNS,
    MAX_REPLY_TOKENS,
    MAX_SUMMARY_TOKENS,
    MIN_FOLD_ROOM,
    MIN_MESSAGE_ROOM,
    ContextBudgetError,
    FoldPolicy,
    PreparedContext,
    Source,
    SummaryError,
    SummaryVersion,
    TurnStats,
)

__all__ = [
    "DEFAULT_MODEL",
    "MAX_INPUT_TOKENS",
    "MAX_RECENT_TURNS",
    "MAX_REPLY_TOKENS",
    "MAX_SUMMARY_TOKENS",
    "MIN_FOLD_ROOM",
    "MIN_MESSAGE_ROOM",
    "ContextBudgetError",
    "FoldPolicy",
    "PlanSizes",
    "PreparedContext",
    "ShortTermMemory",
    "Source",
    "SummaryError",
    "SummaryVersion",
    "Turn",
    "TurnPlan",
    "TurnStats",
    "fold_pieces",
    "plan_turn",
    "whole_sentences",
]
