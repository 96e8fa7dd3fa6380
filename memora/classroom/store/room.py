"""Room for one turn in the store, asked before the turn is sent: its largest saved growth, and the bytes booked for it.

A reply the model has billed must be saved, so a store cap is checked before the message is sent, with
room for everything the turn can add to the saved payload (``turn_growth``):

- the message, twice: in the history and as the last context's current message;
- the reply at the reply cap: ``max_reply_tokens`` tokens of at most ``BYTES_PER_TOKEN`` saved bytes each;
- one summary version and its ledger row per pair the turn and its fold ahead can fold: every pair not
  folded yet, plus the turn's own (each fold request folds at least one pair), each summary at
  ``max_summary_tokens`` (the summarizer cuts it there, in o200k_base tokens);
- the reply's ledger row;
- the new last context: a summary, every message not folded yet, and the message (the old one is not
  subtracted: an upper bound, not an estimate).

``BYTES_PER_TOKEN`` is o200k_base's costliest token as saved JSON text: 128 spaces (a test reads the whole
vocabulary). A server whose own tokenizer has longer tokens can pass the bound; its save is then refused
as before, and the page keeps the turn and says so. A reply uncapped by the page (``max_reply_tokens``
None) is bounded at ``MAX_REPLY_TOKENS``, the cap the classroom's budget books for it.

The bound is large beside a typical turn (about 130 KB for the reply alone at the default 1,000-token
cap), so a conversation is refused its next turn once it is within that much of its cap: the price of
never billing a reply that cannot be kept.

``BOOKINGS`` holds, per store, the growth of the turns admitted and still running in this process, so
students sending at once cannot all be admitted on the same last bytes. Several processes sharing a
PostgreSQL store do not see each other's bookings: there, only each process's own turns are held apart.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import asdict, dataclass

from memora.memory import MAX_REPLY_TOKENS, ShortTermMemory
from memora.memory.core import served_by
from memora.text.usage import UsageRecord

BYTES_PER_TOKEN = 128
"""The most saved bytes one o200k_base token can take: its longest token (128 spaces); no token needs a JSON escape
that makes it longer (tests/test_store_room.py checks the whole vocabulary)."""
_MESSAGE_FRAME = len(json.dumps({"role": "assistant", "content": ""}, separators=(",", ":"))) + 1  # and its comma
_VERSION_FRAME = 200
"""A summary version's saved fields but its text: the keys, four counts, two flags and the folded range."""
_LARGE = 10**15
_LONGEST_FLOAT = -1.2345678901234567e-100
"""A float whose JSON text is as long as any float's: 17 digits, a sign and a three-digit exponent."""


@dataclass(frozen=True)
class Growth:
    """What one turn may do to the store: the conversation's ``stored`` size (0 when not saved yet), its largest
    size ``after`` the turn, and the bytes ``reserved`` by other turns of this process still running."""

    stored: int
    after: int
    reserved: int = 0

    @property
    def added(self) -> int:
        """The most the store's total can grow by (at least 1: even a small save needs room)."""
        return max(1, self.after - self.stored)


def escaped(text: str) -> int:
    """``text``'s bytes in the saved payload: UTF-8 JSON, escapes included, quotes excluded."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def turn_growth(memory: ShortTermMemory, message: str) -> int:
    """The most bytes a turn for ``message`` (with its folds and the fold ahead after it) adds to ``memory``'s saved payload.

    Reads the memory without its lock: the page asks between turns, when no other turn runs.
    """
    history = memory.history
    unfolded = history[memory.summarized_message_count :]
    summary = memory.limits.max_summary_tokens * BYTES_PER_TOKEN
    ledger_row = _ledger_row(memory)
    sent = 2 * (escaped(message) + _MESSAGE_FRAME)
    reply = (memory.limits.max_reply_tokens or MAX_REPLY_TOKENS) * BYTES_PER_TOKEN + _MESSAGE_FRAME + ledger_row
    folds = (len(unfolded) // 2 + 1) * (summary + _VERSION_FRAME + ledger_row)
    context = summary + _MESSAGE_FRAME + sum(escaped(m.content) + _MESSAGE_FRAME for m in unfolded)
    return sent + reply + folds + context


def _ledger_row(memory: ShortTermMemory) -> int:
    # Every count at 16 digits and every text field at its longest: one row as saved, not an estimate of one.
    model = max(memory.model, served_by(memory), key=len)
    row = UsageRecord(
        turn=_LARGE, kind="summary", model=model, counted_input_tokens=_LARGE, input_tokens=_LARGE, output_tokens=_LARGE,
        total_tokens=_LARGE, latency_s=_LONGEST_FLOAT, reasoning_tokens=_LARGE, cached_tokens=_LARGE, estimated=True,
        full_history_tokens=_LARGE, cut=False, implausible=False, input_budget=_LARGE, context_messages=_LARGE,
        newly_summarized=_LARGE, summary_tokens=_LARGE, server_counted_input_tokens=_LARGE, source="x" * 64,
    )  # fmt: skip
    return len(json.dumps(asdict(row), ensure_ascii=False, separators=(",", ":")).encode()) + 1


class Bookings:
    """The growth booked by the turns of this process still running, per store; thread-safe.

    One booking per holder (a keeper): booking again replaces its last one, so a holder never holds more than
    one. A holder is held weakly: a page gone without giving its booking back (its process thread killed) does
    not keep the bytes booked. The store is named by ``id``, which cannot be reused while a holder refers to it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._booked: weakref.WeakKeyDictionary[object, tuple[int, int]] = weakref.WeakKeyDictionary()

    def reserved(self, store: object, holder: object) -> int:
        """The bytes booked on ``store`` by every holder but ``holder``."""
        with self._lock:
            return sum(size for who, (where, size) in self._booked.items() if where == id(store) and who is not holder)

    def book(self, store: object, holder: object, size: int) -> None:
        with self._lock:
            self._booked[holder] = (id(store), size)

    def release(self, store: object, holder: object) -> None:
        """Drops ``holder``'s booking on ``store``, if any (its turn has ended, and saved what it could)."""
        with self._lock:
            if self._booked.get(holder, (None, 0))[0] == id(store):
                del self._booked[holder]


BOOKINGS = Bookings()
"""This process's bookings: one Streamlit server runs every session's turns in its threads."""
