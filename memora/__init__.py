"""Memora: an English-learning assistant that shows how a chatbot manages short-term memory.

Six parts, each a layer that imports only the ones below it (``tests/test_layers.py`` checks them),
bottom up:

- ``memora.text``: a message, the article's prompts, counting tokens, the usage ledger;
- ``memora.memory``: the lesson, ``ShortTermMemory`` and the rule that decides what a request sends,
  with its seam to a model server (the ``Backend`` Protocol, ``memora.memory.backend``);
- ``memora.backends``: one module per model server behind that Protocol, and the offline engine;
- ``memora.classroom``: what a shared page adds: the store, caps, the server budget, replies that
  outlive a rerun;
- ``memora.teaching``: the tools that show what the memory did: what-if replay, retention probe,
  audit, prices;
- ``memora.app``: what a person runs: the Streamlit page's pieces, the REPL, and the settings
  factory.

``from memora import ShortTermMemory`` imports the memory when the name is first used, so that
importing the bottom part (``import memora.text.messages``) does not load the layers above it.
"""

from __future__ import annotations

__version__ = "0.8.0"
"""The one version string: pyproject.toml reads it, and the REPL's banner prints it."""

__all__ = ["ContextBudgetError", "Message", "ShortTermMemory", "Turn"]


def __getattr__(name: str) -> object:
    """The lesson's names, from the parts that define them; AttributeError for any other name, as
    for a module."""
    if name == "Message":
        from memora.text.messages import Message

        return Message
    if name in ("ContextBudgetError", "ShortTermMemory", "Turn"):
        import memora.backends  # registers the adapter that takes the article's OpenAI() client
        import memora.memory

        return getattr(memora.memory, name)
    raise AttributeError(f"module 'memora' has no attribute {name!r}")
