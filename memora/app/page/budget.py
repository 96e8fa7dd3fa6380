"""The classroom's server-wide budget on the page: where it stands, and this conversation's billed
replies not saved yet.

Both degrade to a notice when the budget's store is down: a page never turns into a traceback
because PostgreSQL or the data folder is out, and it draws normally on the first run after it is
back.
"""

from __future__ import annotations

from memora.app.page import render
from memora.app.page.i18n import t
from memora.classroom.store import StoreError
from memora.classroom.store.keeper import ConversationKeeper
from memora.memory import ShortTermMemory


def render_standing(memory: ShortTermMemory, lang: str) -> None:
    """The Status panel's line: spent (and held for replies in progress) of the cap, or that it
    cannot be read."""
    ledger = getattr(memory.server.backend, "server_ledger", None)
    if ledger is None:
        return
    try:
        standing = ledger.standing()
    except StoreError:
        render.caption(":material/cloud_off: " + t(lang, "status.server_unreachable"))
        return
    figures = {"spent": f"{standing.spent:,}", "limit": f"{standing.max_tokens:,}"}
    if standing.reserved:
        render.caption(
            t(lang, "status.server_reserved", reserved=f"{standing.reserved:,}", **figures)
        )
    else:
        render.caption(t(lang, "status.server_spent", **figures))


def render_unsaved(keeper: ConversationKeeper | None, lang: str) -> None:
    """Under the title, on this conversation's pages only: "not saved yet, will retry" while the
    process holds billed replies of it that the storage could not take, with their tokens (a
    classmate's page shows nothing).

    Read from memory only: drawing it never touches the store that failed.
    """
    if (
        keeper is None
        or keeper.memory is None
        or getattr(keeper.memory.server.backend, "offline", False)
    ):
        return  # the offline engine bills nothing; "could not be saved" says the rest
    unsaved = keeper.unsaved_tokens()
    if unsaved:
        render.alert(
            "warning",
            t(lang, "budget.unsaved", tokens=f"{unsaved:,}"),
            icon=":material/sync_problem:",
        )
