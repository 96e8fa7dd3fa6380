"""Memora: an English-learning assistant that shows how a chatbot manages short-term memory."""

from memora.memory import ContextBudgetError, ShortTermMemory, Turn
from memora.text.messages import Message

__version__ = "0.8.0"
"""The one version string: pyproject.toml reads it, and the REPL's banner prints it."""

__all__ = ["ContextBudgetError", "Message", "ShortTermMemory", "Turn"]
