"""How fast one hostile student can grow the conversation store, with the store's caps and without them.

Run from the repository root: ``python benchmarks/hostile_growth.py [--seconds S] [--postgres URL]``.
A scripted student drives the page's own saving path (``ConversationKeeper``: ``save_import`` for an import,
a turn's save for a message) as fast as the CPU allows, which is faster than any page:

- *import loop*: "Continue from this file" with the biggest file the page accepts (its last context
  padded, as a hostile file would be: 2 MiB without caps; with caps, the largest whose saved
  conversation still fits ``MEMORA_MAX_CONVERSATION_KB``), again and again;
- *long messages + Reset*: messages of ``MEMORA_MAX_MESSAGE_CHARS`` characters (the offline backend
  answers at once) until the conversation can no longer be saved, then Reset, again and again.

Each runs for ``--seconds`` (or until every save is refused) against a fresh SQLite file (and PostgreSQL
with ``--postgres``: give it a database or schema of its own, since what is stored is left there), once with no
caps (as before issue 20) and once with the default caps (``memora.app.settings``), side by side. Printed: the
conversations and MiB stored, and the growth in MiB per hour. Without caps the rate is extrapolated from
the run; with caps a browser's growth is bounded within the hour by ``new_per_hour x conversation_bytes``,
reached in the run's first seconds and then refused until the hour passes, so the MiB stored is the
hour's figure. A student who clears the cookie on every visit is a new browser each time: then the store's
``MEMORA_MAX_STORE_MB`` is the bound, and the last column says how long the uncapped rate would take to reach it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memora.app.settings import Settings  # noqa: E402
from memora.backends.offline import OfflineBackend  # noqa: E402
from memora.classroom.store import ConversationStore, StoreCaps, open_store  # noqa: E402
from memora.classroom.store.keeper import ConversationKeeper  # noqa: E402
from memora.classroom.store.owner import new_owner  # noqa: E402
from memora.classroom.store.reopen import save_import  # noqa: E402
from memora.classroom.store.saved import dumps_saved  # noqa: E402
from memora.classroom.transcript.format import (  # noqa: E402
    MAX_MESSAGE_CHARS,
    MAX_TRANSCRIPT_BYTES,
    continue_in_session,
    dumps_transcript,
    parse_transcript,
)
from memora.memory import ShortTermMemory  # noqa: E402

MIB = 1024 * 1024


@dataclass(frozen=True)
class Growth:
    conversations: int
    stored_bytes: int
    seconds: float
    refused: bool

    def mib_per_hour(self) -> float:
        hour_bytes = self.stored_bytes if self.refused else self.stored_bytes * 3600 / self.seconds
        return hour_bytes / MIB


def session(settings: Settings) -> ShortTermMemory:
    return ShortTermMemory(OfflineBackend(), caps=settings.limits)


def biggest_import(settings: Settings, caps: StoreCaps) -> bytes:
    """The largest transcript the page imports whose saved conversation the caps still keep: one real turn,
    its last context padded (the import caps do not look at it)."""
    memory = session(settings)
    with memory.turn("Hello.") as turn:
        turn.run()
    data = json.loads(dumps_transcript(memory))
    overhead = len(dumps_saved(memory, "en").encode()) - len(json.dumps(data["last_context"], ensure_ascii=False).encode())
    room = min(MAX_TRANSCRIPT_BYTES - 2048, (caps.conversation_bytes or MAX_TRANSCRIPT_BYTES) - overhead - 2048)
    chunk = MAX_MESSAGE_CHARS - 100  # each padding message under the per-message limit, with room for its JSON
    data["last_context"] = [{"role": "user", "content": "x" * min(chunk, room - start)} for start in range(0, room, chunk)]
    del data["last_request"]  # its figures would not match the padding: a file as written before requests were kept
    return json.dumps(data).encode()


def import_loop(store: ConversationStore, settings: Settings, caps: StoreCaps, seconds: float) -> Growth:
    raw = biggest_import(settings, caps)
    keeper, stored, count, began = ConversationKeeper(store, owner=new_owner()), 0, 0, time.perf_counter()
    keeper.attach(session(settings))
    while time.perf_counter() - began < seconds:
        base = session(settings)
        memory = continue_in_session(parse_transcript(raw), base, locked=True)
        if save_import(keeper, memory) is not None:
            return Growth(count, stored, time.perf_counter() - began, True)
        stored += len(dumps_saved(memory, keeper.language).encode())
        count += 1
    return Growth(count, stored, time.perf_counter() - began, False)


def longest_message(settings: Settings) -> str:
    """The longest message a new conversation accepts: ``MEMORA_MAX_MESSAGE_CHARS``, or less when the input budget is smaller."""
    words = ("A long message, typed to fill the store. " * 1000)[: settings.max_message_chars]
    low, high = 1, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        try:
            session(settings).plan(words[:middle])
            low = middle
        except ValueError:
            high = middle - 1
    return words[:low]


def reset_loop(store: ConversationStore, settings: Settings, seconds: float) -> Growth:
    text = longest_message(settings)
    keeper, count, stored, began = ConversationKeeper(store, owner=new_owner()), 0, 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        memory = session(settings)
        keeper.start_new(memory)  # Reset
        if keeper.room(text) is not None:
            return Growth(count, stored, time.perf_counter() - began, True)
        last = 0
        while time.perf_counter() - began < seconds and keeper.room(text) is None:
            try:
                memory.plan(text)
                with memory.turn(text) as turn:
                    turn.run()
            except ValueError:
                break  # the session's own caps (turns, tokens, the budget once a summary takes room): Reset
            finally:
                keeper.release_room()  # as the page's reply job does when it ends
            if keeper.refusal is None:
                last = keeper.version and len(dumps_saved(memory, keeper.language).encode())
        count += 1 if last else 0
        stored += last
    return Growth(count, stored, time.perf_counter() - began, False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each scripted student runs at most")
    parser.add_argument("--postgres", help="a postgresql:// URL of a database (or schema) of its own: hundreds of MiB are left there")
    args = parser.parse_args()
    settings = Settings(locked=True)
    capped = settings.store_caps
    print(
        f"caps: {capped.conversation_bytes // 1024:,} KiB a conversation, {capped.new_per_hour} new a browser an hour, "
        f"{(capped.store_bytes or 0) // MIB:,} MiB a store; messages of {len(longest_message(settings)):,} characters "
        f"(MEMORA_MAX_MESSAGE_CHARS {settings.max_message_chars:,}, within the input budget); "
        f"each student runs {args.seconds:g} s at most"
    )
    columns = ("conversations", "MiB stored", "s", "MiB/hour", "store full in")
    print(f"{'store':<10} {'student':<24} {'caps':<5} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, (13, 10, 6, 9, 13), strict=True)))
    with tempfile.TemporaryDirectory() as folder:
        urls = {"SQLite": f"sqlite:///{folder}/hostile-{{}}.sqlite3"}
        if args.postgres:
            urls["PostgreSQL"] = args.postgres
        for name, url in urls.items():
            for student in ("import loop", "long messages + Reset"):
                for label, caps in (("off", StoreCaps()), ("on", capped)):
                    store = open_store(url.format(f"{student[:4]}-{label}"), caps)
                    assert store is not None
                    if student == "import loop":
                        growth = import_loop(store, settings, caps, args.seconds)
                    else:
                        growth = reset_loop(store, settings, args.seconds)
                    rate = growth.mib_per_hour()
                    full = "" if label == "on" or not rate else f"{(capped.store_bytes or 0) / MIB / (rate / 3600):,.0f} s"
                    print(
                        f"{name:<10} {student:<24} {label:<5} {growth.conversations:>13,} {growth.stored_bytes / MIB:>10.1f} "
                        f"{growth.seconds:>6.1f} {rate:>9,.1f} {full:>13}",
                        flush=True,
                    )
                    store.close()


if __name__ == "__main__":
    main()
