"""Conversation persistence: where a page's conversation is kept between reloads and restarts.

``MEMORA_STORE_URL`` picks the store (``open_store``):

- ``sqlite:///path/to/file.sqlite3`` (``sqlite:////abs/path`` for an absolute path): one SQLite
  file, the default (``conversations.sqlite3`` under ``MEMORA_DATA_DIR``);
- ``postgresql://user:password@host:5432/db``: a PostgreSQL database that several processes share;
- ``off``: nothing is kept; a reload starts a new conversation.

This keeps one conversation, not the learner: see ``base`` for what it is and is not.
"""

from __future__ import annotations

from pathlib import Path

from memora.classroom.grace import DEFAULT_SHUTDOWN_GRACE_S, turn_outlives_stop_s
from memora.classroom.store.base import (
    CapReached,
    ConversationStore,
    Gone,
    IdleSweep,
    StoreCaps,
    StoredConversation,
    StoreError,
    StoreUnreachable,
    VersionConflict,
    is_conversation_id,
    new_conversation_id,
)

CONVERSATIONS_DB_NAME = "conversations.sqlite3"
OFF = "off"


class StoreURLError(ValueError):
    """``MEMORA_STORE_URL`` is neither ``off``, a ``sqlite:///`` path nor a ``postgresql://``
    URL."""


def default_store_url(data_dir: str) -> str:
    return "sqlite:///" + str(Path(data_dir).expanduser() / CONVERSATIONS_DB_NAME)


def check_store_url(url: str) -> str:
    """``url`` as given, when ``open_store`` can take it; raises StoreURLError, naming the variable,
    otherwise."""
    if url == OFF or url.startswith(("postgresql://", "postgres://")):
        return url
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return url
    # The value may hold a password: the message names only the forms that are accepted.
    raise StoreURLError(
        "MEMORA_STORE_URL must be off, sqlite:///<path> or postgresql://user:password@host/db"
    )


def open_store(
    url: str, caps: StoreCaps | None = None, grace_s: float = DEFAULT_SHUTDOWN_GRACE_S
) -> ConversationStore | None:
    """The store ``url`` names, with ``caps``, or None for ``off``. Nothing is opened until the
    first load or save. ``grace_s`` is the process's shutdown grace: after a PostgreSQL restart, a
    turn's holder is taken for alive that long and its unwind (``grace.turn_outlives_stop_s``), as a
    stopping process may still save its reply."""
    check_store_url(url)
    if url == OFF:
        return None
    if url.startswith("sqlite:///"):
        from memora.classroom.store.sqlite import SqliteStore

        return SqliteStore(url.removeprefix("sqlite:///"), caps)
    from memora.classroom.store.postgres import PostgresStore

    return PostgresStore(url, caps, settle_s=turn_outlives_stop_s(grace_s))


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("postgresql://", "postgres://"))


__all__ = [
    "CapReached",
    "ConversationStore",
    "Gone",
    "IdleSweep",
    "StoreCaps",
    "StoreError",
    "StoreURLError",
    "StoreUnreachable",
    "StoredConversation",
    "VersionConflict",
    "check_store_url",
    "default_store_url",
    "is_conversation_id",
    "is_postgres",
    "new_conversation_id",
    "open_store",
]
