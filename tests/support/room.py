"""A second process whose student sends a turn into a nearly full shared store (issue 39: room booked in the store).

``python -m tests.support.room URL READY GO OUT`` opens the PostgreSQL store at ``URL`` with a store cap of
``STORE_BYTES``, saves a conversation of its own, writes the most its next turn may add to ``READY``, waits for
the file ``GO``, then asks for room and sends the turn if admitted, as the page does (``ConversationKeeper.room``,
the turn, ``release_room``), and writes what happened to ``OUT``. Both students have asked for room before either
sends (``OUT.asked`` and ``GO.asked``), so their turns overlap however the two processes are scheduled.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from memora.classroom.store.base import StoreCaps
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_owner
from memora.classroom.store.postgres import PostgresStore
from memora.classroom.store.room import turn_growth
from memora.memory import ShortTermMemory
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat

STORE_BYTES = 2_000_000
MESSAGE = "Is there room for my turn?"
GO_WAIT_S = 60.0
"""How long the process waits for the start signal: a bound on a hang, not a measure of speed."""


def student(store: PostgresStore) -> tuple[ConversationKeeper, ScriptedBackend]:
    """A browser of its own with one saved turn."""
    backend = ScriptedBackend()
    keeper = ConversationKeeper(store, owner=new_owner())
    keeper.attach(memory := ShortTermMemory(backend, max_recent_turns=1))
    chat(memory, "Hello.")
    assert keeper.saved
    return keeper, backend


def next_turn_growth(keeper: ConversationKeeper) -> int:
    """The most the store may grow by for ``MESSAGE``: what ``room`` books for it."""
    assert keeper.memory is not None and keeper.size is not None
    return keeper.size + turn_growth(keeper.memory, MESSAGE) - keeper.stored_bytes


def send(keeper: ConversationKeeper, backend: ScriptedBackend, asked: Path, other_asked: Path) -> dict[str, object]:
    """What the page does with one message: room first, the turn only when admitted, the booking given back.
    Writes ``asked`` once room was asked for, and sends only once the other student has too (``other_asked``)."""
    refusal = keeper.room(MESSAGE)
    asked.touch()
    deadline = time.monotonic() + GO_WAIT_S
    while not other_asked.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    if refusal is not None:
        return {"admitted": False, "billed": len(backend.billed), "saved": keeper.saved, "cap": str(refusal)}
    try:
        assert keeper.memory is not None
        chat(keeper.memory, MESSAGE)
    finally:
        keeper.release_room()
    unsaved = keeper.refusal is not None or keeper.dirty
    return {"admitted": True, "billed": len(backend.billed), "unsaved": unsaved, "version": keeper.version}


def main(argv: list[str]) -> None:
    url, ready, go, out = argv
    store = PostgresStore(url, StoreCaps(store_bytes=STORE_BYTES))
    keeper, backend = student(store)
    Path(ready).write_text(str(next_turn_growth(keeper)))
    deadline = time.monotonic() + GO_WAIT_S
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    Path(out).write_text(json.dumps(send(keeper, backend, Path(out + ".asked"), Path(go + ".asked"))))
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
