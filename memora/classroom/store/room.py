"""Room for one turn in the store, asked before the turn is sent: its largest saved growth, and the
bytes booked for it.

A reply the model has billed must be saved, so a store cap is checked before the message is sent,
with room for everything the turn can add to the saved payload (``turn_growth``):

- the message, twice: in the history and as the last context's current message;
- the reply at the reply cap: ``max_reply_tokens`` tokens of at most ``BYTES_PER_TOKEN`` saved bytes
  each;
- one summary version and its ledger row per pair the turn and its fold ahead can fold: every pair
  not folded yet, plus the turn's own (each fold request folds at least one pair), each summary at
  ``max_summary_tokens`` (the summarizer cuts it there, in o200k_base tokens);
- the reply's ledger row; every row with its request's parts (``RequestParts``: a number and a count
  for each message the request carried, at most every message not folded yet and the turn's two);
- the new last context: a summary, every message not folded yet, and the message (the old one is not
  subtracted: an upper bound, not an estimate), and beside it the last request's figures
  (``last_request``): its instructions, each message's source and tokens, and its counts.

``BYTES_PER_TOKEN`` is o200k_base's costliest token as saved JSON text: 128 spaces (a test reads the
whole vocabulary). A server whose own tokenizer has longer tokens can pass the bound; its save is
then refused as before, and the page keeps the turn and says so. A reply uncapped by the page
(``max_reply_tokens`` None) is bounded at ``MAX_REPLY_TOKENS``, the cap the classroom's budget books
for it.

The bound is large beside a typical turn (about 130 KB for the reply alone at the default
1,000-token cap), so a conversation is refused its next turn once it is within that much of its cap:
the price of never billing a reply that cannot be kept.

The growth of a turn admitted is booked in the store itself (``ConversationStore.book``) until its
job ends, so students sending at once, on one process or several sharing a PostgreSQL store, are
never admitted on the same last bytes.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from memora.memory import MAX_REPLY_TOKENS, ShortTermMemory
from memora.memory.core import served_by
from memora.text.usage import RequestParts, SentMessage, UsageRecord

BYTES_PER_TOKEN = 128
"""The most saved bytes one o200k_base token can take: its longest token (128 spaces); no token
needs a JSON escape that makes it longer (tests/test_store_room.py checks the whole vocabulary)."""
_MESSAGE_FRAME = (
    len(json.dumps({"role": "assistant", "content": ""}, separators=(",", ":"))) + 1
)  # and its comma
_VERSION_FRAME = 200
"""A summary version's saved fields but its text: the keys, four counts, two flags and the folded
range."""
_REQUEST_FRAME = 300
"""The last request's saved fields but its instructions and its lists: the keys and four counts at
16 digits."""
_PER_CONTEXT_MESSAGE = len(json.dumps(["instructions_summary", 10**15])) + 2
"""One context message's source and token count in the last request: the longest source, a 16-digit
count, commas."""
_LARGE = 10**15
_LONGEST_FLOAT = -1.2345678901234567e-100
"""A float whose JSON text is as long as any float's: 17 digits, a sign and a three-digit
exponent."""


def escaped(text: str) -> int:
    """``text``'s bytes in the saved payload: UTF-8 JSON, escapes included, quotes excluded."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def turn_growth(memory: ShortTermMemory, message: str) -> int:
    """The most bytes a turn for ``message`` (with its folds and the fold ahead after it) adds to
    ``memory``'s saved payload.

    Reads the memory without its lock: the page asks between turns, when no other turn runs.
    """
    history = memory.history
    unfolded = history[memory.summarized_message_count :]
    summary = memory.limits.max_summary_tokens * BYTES_PER_TOKEN
    # A request's parts number each message it carries: at most every unfolded message and this
    # turn's two.
    ledger_row = _ledger_row(memory, len(unfolded) + 2)
    sent = 2 * (escaped(message) + _MESSAGE_FRAME)
    reply = (
        (memory.limits.max_reply_tokens or MAX_REPLY_TOKENS) * BYTES_PER_TOKEN
        + _MESSAGE_FRAME
        + ledger_row
    )
    folds = (len(unfolded) // 2 + 1) * (summary + _VERSION_FRAME + ledger_row)
    context = summary + _MESSAGE_FRAME + sum(escaped(m.content) + _MESSAGE_FRAME for m in unfolded)
    # Instructions travel as the request's own field or inside its system message: either way at
    # most the prompt.
    request = (
        _REQUEST_FRAME + escaped(memory.system_prompt) + (len(unfolded) + 2) * _PER_CONTEXT_MESSAGE
    )
    return sent + reply + folds + context + request


def _ledger_row(memory: ShortTermMemory, messages: int) -> int:
    """One ledger row at its largest, its parts carrying ``messages`` history messages.

    Every count at 16 digits and every text field at its longest: one row as saved, not an estimate
    of one."""
    model = max(memory.model, served_by(memory), key=len)
    largest = SentMessage(_LARGE, _LARGE)
    parts = RequestParts(
        _LARGE, _LARGE, (largest,) * messages, largest, _LARGE, _LARGE, "high_water"
    )
    row = UsageRecord(
        turn=_LARGE,
        kind="summary",
        model=model,
        counted_input_tokens=_LARGE,
        input_tokens=_LARGE,
        output_tokens=_LARGE,
        total_tokens=_LARGE,
        latency_s=_LONGEST_FLOAT,
        reasoning_tokens=_LARGE,
        cached_tokens=_LARGE,
        estimated=True,
        full_history_tokens=_LARGE,
        cut=False,
        implausible=False,
        input_budget=_LARGE,
        context_messages=_LARGE,
        newly_summarized=_LARGE,
        summary_tokens=_LARGE,
        server_counted_input_tokens=_LARGE,
        source="x" * 64,
        parts=parts,
    )
    return len(json.dumps(asdict(row), ensure_ascii=False, separators=(",", ":")).encode()) + 1
