"""What a panel derives from the conversation, built once and kept in the session until the
conversation changes.

The history is a frozen value (``memora.memory.plan.History``: the memory replaces it at each
change) and the ledger only grows, so "has it changed?" is a question of identity and length, not of
content: ``conversation_key`` answers it in constant time. A panel's table or chart of a
conversation at the size cap took tenths of a CPU-second to rebuild; a rerun with nothing new now
rebuilds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import streamlit as st

from memora.app.page import state as keys
from memora.memory import ShortTermMemory
from memora.teaching.story import Story, story

T = TypeVar("T")


class Same:
    """Equal only to a ``Same`` of the very same object: a key part for a value compared by
    identity, kept alive by the key so that its id cannot be reused by another object while the key
    is held."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def conversation_key(memory: ShortTermMemory) -> tuple[Hashable, ...]:
    """Changes whenever the history, its summary versions or the ledger do: the frozen history by
    identity, the append-only ledger by identity and length (a restore or an import gives a new
    ledger object)."""
    return (Same(memory.conversation), Same(memory.ledger), len(memory.ledger))


def derived(name: str, key: tuple[Hashable, ...], build: Callable[[], T]) -> T:
    """``build()``, or the value it gave in this session for the same ``name`` and ``key``: one
    value per name is kept, so a changed key replaces it. Outside a Streamlit session nothing is
    kept."""
    cache: dict[str, tuple[tuple[Hashable, ...], Any]] | None = st.session_state.get(keys.DERIVED)
    if cache is None:
        return build()
    kept = cache.get(name)
    if kept is not None and kept[0] == key:
        return kept[1]
    value = build()
    cache[name] = (key, value)
    return value


def memory_story(memory: ShortTermMemory) -> Story:
    """``story(memory)``, told once per change of the ledger or the summary: the chat, the turn
    boxes, Status, the summary panel and the ledger all read this one story."""
    return derived("story", conversation_key(memory), lambda: story(memory))
