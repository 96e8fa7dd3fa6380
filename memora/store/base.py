"""What a conversation store is: a few verbs on whole conversations, each saved under an unguessable id.

This is *conversation persistence*: the page's short-term memory (history, summary versions, ledger,
settings) survives a reload or a restart. It is not long-term memory: nothing is carried from one
conversation into another, and nothing is recalled across ids.

Every save replaces the whole saved payload in one transaction and bumps a version number. A save names
the version it was built on, so two tabs writing one id cannot overwrite each other: the second one gets
``VersionConflict`` and must save elsewhere (the page forks it to a new id).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{32}")
"""``secrets.token_urlsafe(24)``: 24 random bytes, 32 URL-safe characters."""
SWEEP_INTERVAL_S = 3600.0
"""The idle sweep runs at most hourly per process: it is a housekeeping DELETE, not part of any turn."""


class StoreError(RuntimeError):
    """The store could not be reached or could not complete a read or write; nothing was changed by it."""


class VersionConflict(StoreError):
    """The conversation was saved by someone else (another tab) since this copy was loaded or saved."""

    def __init__(self, conversation_id: str, expected: int, found: int | None) -> None:
        self.conversation_id, self.expected, self.found = conversation_id, expected, found
        super().__init__(f"conversation {conversation_id} is at version {found}, not {expected}")


@dataclass(frozen=True)
class StoredConversation:
    """One saved conversation: its id, its version (1 after the first save), the payload and when it was saved."""

    conversation_id: str
    version: int
    payload: str
    updated_at: datetime


def new_conversation_id() -> str:
    """An unguessable id: whoever knows it can open the conversation, so it is as strong as a session token."""
    return secrets.token_urlsafe(24)


def is_conversation_id(text: str | None) -> bool:
    """Whether ``text`` has the shape of an id this module makes (a URL may carry anything)."""
    return bool(text) and ID_PATTERN.fullmatch(text or "") is not None


class ConversationStore(Protocol):
    """Whole conversations by id. Implementations are safe to share between the threads of one process."""

    def load(self, conversation_id: str) -> StoredConversation | None:
        """The saved conversation, or None when there is none under that id (never saved, or swept). Raises StoreError."""
        ...

    def save(self, conversation_id: str, payload: str, expected_version: int) -> StoredConversation:
        """Replaces the payload in one transaction and returns the new row (version ``expected_version + 1``).

        ``expected_version`` is 0 for a conversation never saved. Raises VersionConflict, changing
        nothing, when the stored version is another (or, for 0, when the id is taken); StoreError otherwise.
        """
        ...

    def delete_idle(self, idle_for: timedelta) -> int:
        """Deletes conversations not saved for longer than ``idle_for``; returns how many. Raises StoreError."""
        ...

    def close(self) -> None:
        """Releases connections; the store is not used afterwards."""
        ...


class IdleSweep:
    """Runs ``store.delete_idle(idle_for)`` when called, at most once per ``interval_s`` (per process).

    A failed sweep is retried at the next due call; it never fails the save that triggered it.
    """

    def __init__(self, store: ConversationStore, idle_for: timedelta, interval_s: float = SWEEP_INTERVAL_S) -> None:
        self.store, self.idle_for, self.interval_s = store, idle_for, interval_s
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def maybe_run(self) -> int | None:
        """How many conversations were deleted, or None when no sweep was due (or it failed)."""
        with self._lock:
            if time.monotonic() < self._next:
                return None
            self._next = time.monotonic() + self.interval_s
        try:
            return self.store.delete_idle(self.idle_for)
        except StoreError:
            with self._lock:
                self._next = time.monotonic()
            return None
