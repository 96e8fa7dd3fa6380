"""How long one rerun of the page takes as the history grows: 10, 100 and 500 turns.

Run from the repository root: ``python benchmarks/page_rerun.py [--repeats N]``.
Each history is built through the memory's own turns with the offline backend,
placed in session state, and the page is rerun through AppTest. Printed: the
median rerun time per size and its ratio to the 10-turn figure, with the lazy
expanders (older chat messages, full history, token usage) closed and then open.
Timings are machine-dependent; compare the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from memora.backends.offline import OfflineBackend  # noqa: E402
from memora.memory import ShortTermMemory  # noqa: E402
from memora.ui import state as keys  # noqa: E402

SIZES = (10, 100, 500)


def build_memory(turns: int) -> ShortTermMemory:
    memory = ShortTermMemory(OfflineBackend())
    for number in range(1, turns + 1):
        with memory.turn(f"Question {number}: how do I say this politely at a hotel, an airport or a station?") as turn:
            turn.run()
    return memory


def median_rerun(memory: ShortTermMemory, repeats: int, open_panels: bool) -> float:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
    at.session_state[keys.MEMORY] = memory
    if open_panels:
        at.session_state[keys.OLDER_MESSAGES_OPEN] = True
        at.session_state[keys.HISTORY_PANEL_OPEN] = True
        at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.run()  # the first run compiles the script and warms caches
    assert not at.exception, at.exception
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    memories = {}
    for turns in SIZES:
        began = time.perf_counter()
        memories[turns] = build_memory(turns)
        print(f"built {turns} turns in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    for open_panels in (False, True):
        label = "expanders open" if open_panels else "expanders closed (default)"
        results = {turns: median_rerun(memories[turns], args.repeats, open_panels) for turns in SIZES}
        base = results[SIZES[0]]
        print(f"\n{label}: median of {args.repeats} reruns")
        for turns, seconds in results.items():
            print(f"  {turns:>4} turns: {seconds * 1000:7.1f} ms  ({seconds / base:4.2f}x the {SIZES[0]}-turn rerun)")


if __name__ == "__main__":
    main()
