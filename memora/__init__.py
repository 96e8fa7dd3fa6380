"""Memora: an English-learning assistant that shows how a chatbot manages short-term memory."""

from memora.memory import ContextBudgetError, ShortTermMemory, Turn
from memora.messages import Message

__all__ = ["ContextBudgetError", "Message", "ShortTermMemory", "Turn"]
