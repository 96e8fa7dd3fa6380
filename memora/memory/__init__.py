"""The short-term memory: the article's ``ShortTermMemory`` and the pieces it is made of.

Read in this order: ``planner`` (the budget rule, pure functions of token counts), ``core``
(``ShortTermMemory``, one class, closed by the article's own method names), ``fitting`` (the rule's
one caller: prepare's plan, folds and the server's count; prefold), ``turn`` (a transactional turn),
``history`` (the history as a frozen value), ``summarizer`` (one bounded summary request, and
``fold_pieces``), ``prefold`` (what to fold between turns), ``budget`` (the budget in force and what
the server's count teaches), ``context`` and ``sizes`` (what a request sends, and the size of its
fixed parts), ``values`` (limits, errors and frozen values).
"""

from memora.memory.core import ShortTermMemory, Turn
from memora.memory.plan import PlanSizes, TurnPlan, fold_pieces, plan_turn
from memora.memory.summarizer import whole_sentences
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
