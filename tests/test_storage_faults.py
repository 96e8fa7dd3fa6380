"""A storage fault never costs a billed reply: a real full and a real read-only data folder, with the server budget on.

The data folder is a small tmpfs (root only: skipped with the reason elsewhere, a failure under CI).
The fault strikes while the model is answering, after the request was booked: the disk fills, or it
turns read-only. The page must show and keep the billed reply, count its spend (held in memory), say
"not saved yet, will retry", log one line, and write everything once the folder is back. A message sent
while the folder is still out is refused before anything is sent, its text kept.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.app.page.conversation import shared_store
from memora.app.page.state import new_memory
from memora.app.settings import Settings
from memora.classroom.store import ConversationStore
from memora.classroom.store.saved import parse_saved
from memora.memory.backend import ReplyRequest
from tests.support.app import APP, CLASSROOM_KEY, JOB_WAIT_S, finish, send, texts, tree_text
from tests.support.budget import fill, remount, small_tmpfs
from tests.support.fakes import ScriptedBackend

pytestmark = pytest.mark.usefixtures("no_secrets")

CAP = 100_000


@pytest.fixture(autouse=True)
def fresh_store_cache():
    shared_store.clear()
    yield
    shared_store.clear()


@dataclass
class FaultOnReply(ScriptedBackend):
    """A recording fake whose next reply runs ``fault`` once it has been sent (booked, and now being billed).

    The reply runs on the page's reply thread, and the run that started it may still be drawing the page; that
    run can open the store and the budget file, and Linux refuses a read-only remount while any file is open
    for writing. So the fault waits for ``page_drawn``, which the test sets when that run has ended.
    """

    fault: Callable[[], None] | None = None
    page_drawn: threading.Event = field(default_factory=threading.Event)

    def stream_reply(self, request: ReplyRequest):
        fault, self.fault = self.fault, None
        if fault is not None:
            assert self.page_drawn.wait(JOB_WAIT_S), "the page's run never ended"
            fault()
        yield from super().stream_reply(request)


def open_page(data: Path, backend: ScriptedBackend) -> AppTest:
    settings = Settings(
        backend="openai", model="gpt-4.1-mini", api_key=CLASSROOM_KEY, max_reply_tokens=100, max_server_tokens=CAP, data_dir=str(data)
    )
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[keys.SETTINGS] = settings
    at.session_state[keys.MEMORY] = new_memory(settings, backend)
    return finish(at.run())


def ledger_rows(data: Path) -> tuple[int, int]:
    """The budget file's settled total and how many bookings are still open, read straight from the file."""
    with sqlite3.connect(data / "usage.sqlite3") as check:
        settled = check.execute("SELECT COALESCE(SUM(tokens), 0) FROM requests WHERE settled = 1").fetchone()[0]
        open_ = check.execute("SELECT COUNT(*) FROM requests WHERE settled = 0").fetchone()[0]
    check.close()
    return settled, open_


def billed(backend: ScriptedBackend) -> int:
    return sum(tokens for _, tokens in backend.billed)


def storage_fault_drill(tmp_path: Path, caplog, break_folder: Callable[[Path, ConversationStore], Callable[[], None]]) -> None:
    """One student, the folder breaking mid-reply, a message while it is out, then the folder back.

    ``break_folder(data, store)`` breaks the folder (``store`` is the page's conversation store) and returns what mends it.
    """
    caplog.set_level("INFO")
    with small_tmpfs(tmp_path / "data") as data:
        backend = FaultOnReply()
        at = open_page(data, backend)
        send(at, "My name is Ana.")
        keeper = at.session_state[keys.CONVERSATION]
        assert keeper.saved and ledger_rows(data) == (billed(backend), 0)

        mend: list[Callable[[], None]] = []
        backend.fault = lambda: mend.append(break_folder(data, keeper.store))
        at.chat_input[0].set_value("I live in Porto.").run()
        backend.page_drawn.set()
        finish(at)
        assert not at.exception
        assert mend, "the folder was broken (a failure to break it reads as the model's error)"
        memory = at.session_state[keys.MEMORY]
        assert [m.content for m in memory.history][2:] == ["I live in Porto.", "reply 2"], "the billed reply is kept"
        page = texts(at)
        assert "reply 2" in page, "and shown"
        assert "Not saved yet, will retry" in page and f"{backend.billed[1][1]:,} billed tokens" in page
        assert "could not be saved" in page, "the conversation store's own retry notice"
        classmate = open_page(data, ScriptedBackend())  # issue 28: the notice was server-wide
        assert "Not saved yet" not in texts(classmate) and "could not be saved" not in texts(classmate)
        assert f"{billed(backend):,} of {CAP:,} tokens spent" in page, "the held spend is counted"
        warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == "memora.classroom.server_budget"]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        logged = caplog.text
        assert keeper.conversation_id not in logged and CLASSROOM_KEY not in logged and str(data) not in logged

        sent = len(backend.replies)
        at.chat_input[0].set_value("Am I sent while the folder is out?").run()
        finish(at)
        assert len(backend.replies) == sent, "no booking, so nothing was sent"
        assert "nothing was sent and nothing was billed" in texts(at)
        assert at.chat_input[0].value == "Am I sent while the folder is out?"
        assert not at.exception and "Traceback" not in tree_text(at)

        mend[0]()
        at.run()  # the next step of the page writes what was held, and saves the conversation
        assert not at.exception
        page = texts(at)
        assert "Not saved yet" not in page and "could not be saved" not in page
        settled, still_open = ledger_rows(data)
        missing = billed(backend) - settled
        assert (missing, still_open) == (0, 0), f"{missing} billed tokens missing from the ledger"
        stored = parse_saved(keeper.store.load(keeper.conversation_id, keeper.owner).payload)
        assert [m.content for m in stored.transcript.history][-1] == "reply 2"
        assert len([r for r in caplog.records if r.levelname == "WARNING" and r.name == "memora.classroom.server_budget"]) == 1

        send(at, "And now?")
        assert at.session_state[keys.MEMORY].history[-1].content == "reply 3"
        assert ledger_rows(data) == (billed(backend), 0)


def test_a_full_data_folder_loses_no_billed_reply_and_no_billed_token(tmp_path, caplog) -> None:
    def fill_up(data: Path, _store: ConversationStore) -> Callable[[], None]:
        filler = fill(data)
        return filler.unlink

    storage_fault_drill(tmp_path, caplog, fill_up)


def test_a_read_only_data_folder_loses_no_billed_reply_and_no_billed_token(tmp_path, caplog) -> None:
    def read_only(data: Path, store: ConversationStore) -> Callable[[], None]:
        # Linux refuses remount,ro while a file is open for writing; the page's store keeps one open between
        # saves, so it is closed first (it reopens on its next save, as after any failure).
        store.close()
        remount(data, "ro")
        return lambda: remount(data, "rw")

    storage_fault_drill(tmp_path, caplog, read_only)
