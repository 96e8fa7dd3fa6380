"""What saving a conversation after every turn costs, beside the turn's own bookkeeping: 10, 100 and 500 turns.

Run from the repository root: ``python benchmarks/conversation_save.py [--repeats N] [--postgres URL]``.
Each history is built through the memory's own turns with the offline backend (which answers at once,
so a turn's time is Memora's own bookkeeping: limits, planning, counting, the ledger, and any fold).
For each size it times, as medians over ``--repeats`` copies of that conversation: one more turn with no
store; building the saved payload (``dumps_saved``); and one save (payload and transaction) to a SQLite
file and, with ``--postgres``, to PostgreSQL. Printed side by side with the ratio of a save to the turn.
Timings are machine-dependent; compare the ratios.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memora.backends.offline import OfflineBackend  # noqa: E402
from memora.classroom.store import ConversationStore, new_conversation_id, open_store  # noqa: E402
from memora.classroom.store.owner import new_owner  # noqa: E402
from memora.classroom.store.saved import dumps_saved  # noqa: E402
from memora.memory import ShortTermMemory  # noqa: E402

SIZES = (10, 100, 500)
OWNER = new_owner()
TEXT = "Question {n}: how do I say this politely at a hotel, an airport or a station?"


def build_memory(turns: int) -> ShortTermMemory:
    memory = ShortTermMemory(OfflineBackend())
    for number in range(1, turns + 1):
        with memory.turn(TEXT.format(n=number)) as turn:
            turn.run()
    return memory


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def one_turn(memory: ShortTermMemory, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        clone = copy.deepcopy(memory)
        began = time.perf_counter()
        with clone.turn(TEXT.format(n=len(clone.history) // 2 + 1)) as turn:
            turn.run()
        samples.append(time.perf_counter() - began)
    return median_ms(samples)


def payload(memory: ShortTermMemory, repeats: int) -> tuple[float, int]:
    samples, size = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        size = len(dumps_saved(memory, "en").encode())
        samples.append(time.perf_counter() - began)
    return median_ms(samples), size


def one_save(store: ConversationStore, memory: ShortTermMemory, repeats: int) -> float:
    """A save as the page makes it after a turn: the payload, then one transaction replacing the last version."""
    cid, version, samples = new_conversation_id(), 0, []
    for _ in range(repeats + 1):
        began = time.perf_counter()
        version = store.save(cid, dumps_saved(memory, "en"), version, OWNER).version
        samples.append(time.perf_counter() - began)
    return median_ms(samples[1:])  # the first creates the row; the page's saves after it replace one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--postgres", help="a postgresql:// URL to time as well (its tables are created if missing)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        stores: dict[str, ConversationStore] = {"SQLite": open_store(f"sqlite:///{folder}/bench.sqlite3")}  # type: ignore[dict-item]
        if args.postgres:
            stores["PostgreSQL"] = open_store(args.postgres)  # type: ignore[assignment]
        header = f"{'turns':>6} {'turn ms':>8} {'payload ms':>10} {'payload KiB':>11}"
        for name in stores:
            header += f" {name + ' save ms':>18} {'save/turn':>9}"
        print(header)
        for size in SIZES:
            memory = build_memory(size)
            turn_ms = one_turn(memory, args.repeats)
            payload_ms, size_bytes = payload(memory, args.repeats)
            row = f"{size:>6} {turn_ms:>8.2f} {payload_ms:>10.2f} {size_bytes / 1024:>11.1f}"
            for store in stores.values():
                save_ms = one_save(store, memory, args.repeats)
                row += f" {save_ms:>18.2f} {save_ms / turn_ms:>9.2f}"
            print(row, flush=True)
        for store in stores.values():
            store.close()


if __name__ == "__main__":
    main()
