"""Where the bench's bookkeeping goes: the memory's own tokenizations, and the rest (Python).

    python benchmarks/bookkeeping_split.py [--strategy memora-watermark+prefold] [--turns 10,100,1000]

Plays the blocks ``benchmarks.memory.run.bookkeeping_us`` plays (same states, same fresh
messages, backend time subtracted the same way) and times, besides, every o200k_base
encode the memory itself makes (the recording backend's own counts are not the
memory's and are left out, as the bench leaves them out). Prints per history length
the bookkeeping per turn, the part spent tokenizing and the rest, each as a multiple
of ``tokenization_us`` (one tokenization of a turn's new message, the fastest of five
tries), and the same split for turns that folded and turns that did not. It also times
each message's first tokenization, which is the one the memory makes. The timing wrapper adds well under a
microsecond per encode; it is a diagnosis, not the bench's figure.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.memory.recording import RecordingBackend
from benchmarks.memory.run import replay, strategies, tokenization_us
from benchmarks.memory.script import make_script
from benchmarks.memory.strategies import Limits
from memora.text.tokens import o200k_base


class EncodeClock:
    """Times the encoding's ``encode_ordinary`` calls made outside the recording backend."""

    def __init__(self) -> None:
        self.seconds, self.calls, self.tokens, self.in_backend = 0.0, 0, 0, False
        encoding = o200k_base()
        plain = encoding.encode_ordinary

        def timed(text: str) -> list[int]:
            if self.in_backend:
                return plain(text)
            began = time.perf_counter()
            tokens = plain(text)
            self.seconds += time.perf_counter() - began
            self.calls, self.tokens = self.calls + 1, self.tokens + len(tokens)
            return tokens

        encoding.encode_ordinary = timed  # type: ignore[method-assign]
        for name in ("summarize", "count_request"):
            setattr(RecordingBackend, name, self._inside(getattr(RecordingBackend, name)))
        stream = RecordingBackend.stream_reply

        def stream_reply(backend: RecordingBackend, request: Any) -> Iterator[Any]:
            # The backend counts its request before its first delta (its timed part).
            self.in_backend = True
            deltas = stream(backend, request)
            try:
                first = next(deltas)
            finally:
                self.in_backend = False
            yield first
            yield from deltas

        RecordingBackend.stream_reply = stream_reply  # type: ignore[method-assign]

    def _inside(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(backend: RecordingBackend, *args: Any, **kwargs: Any) -> Any:
            self.in_backend = True
            try:
                return method(backend, *args, **kwargs)
            finally:
                self.in_backend = False

        return wrapped


def first_tokenization_us(repeats: int) -> float:
    """The mean first tokenization of each fresh message, as the memory makes it (``tokenization_us`` takes the fastest of five)."""
    encoding = o200k_base()
    times = []
    for repeat in range(repeats):
        for text in make_script(12, seed=10_000 + repeat).user_messages:
            began = time.perf_counter()
            encoding.encode_ordinary(text)
            times.append(time.perf_counter() - began)
    return statistics.fmean(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", default="memora-watermark+prefold")
    parser.add_argument("--turns", default="10,100,1000", help="turns of history, comma-separated")
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    clock = EncodeClock()
    factory = strategies()[args.strategy]
    states = {}
    for turns in (int(n) for n in args.turns.split(",")):
        strategy, _ = replay(factory, make_script(turns, 7), Limits())
        states[turns] = strategy
    unit = tokenization_us(repeats=args.repeats)
    first = first_tokenization_us(args.repeats)
    blocks: dict[int, list[tuple[float, float, int]]] = {n: [] for n in states}
    by_kind: dict[str, list[tuple[float, float]]] = {"fold": [], "no fold": []}
    for repeat in range(args.repeats):
        fresh = make_script(12, seed=10_000 + repeat)
        for turns, state in states.items():
            clone = copy.deepcopy(state)
            clone.backend.replies, clone.backend._next_reply = fresh.replies, 0
            total = encoding = 0.0
            tokens = clock.tokens
            gc.collect()
            gc.disable()
            for text in fresh.user_messages:
                folds, encoded = len(clone.memory.conversation.versions), clock.seconds
                busy, began = clone.backend.busy_s, time.perf_counter()
                clone.play_turn(text)
                spent = time.perf_counter() - began - (clone.backend.busy_s - busy)
                total, encoding = total + spent, encoding + clock.seconds - encoded
                kind = "fold" if len(clone.memory.conversation.versions) > folds else "no fold"
                by_kind[kind].append((spent, clock.seconds - encoded))
            gc.enable()
            n = len(fresh.user_messages)
            blocks[turns].append((total / n, encoding / n, (clock.tokens - tokens) // n))
    print(f"{args.strategy}; one tokenization of a new message: {unit:.2f} us (the first of each: {first:.2f} us on average)")
    for turns, samples in blocks.items():
        spent, encoding, tokens = (statistics.median(s) for s in zip(*samples, strict=True))
        print(
            f"  {turns:>5} turns of history: {spent * 1e6:6.1f} us ({spent * 1e6 / unit:4.1f}x) per turn; "
            f"tokenizing {encoding * 1e6:5.1f} us ({encoding * 1e6 / unit:4.1f}x, {tokens:.0f} tokens); "
            f"the rest {(spent - encoding) * 1e6:5.1f} us ({(spent - encoding) * 1e6 / unit:4.1f}x)"
        )
    for kind, samples in by_kind.items():
        spent, encoding = (statistics.median(s) for s in zip(*samples, strict=True))
        print(
            f"  turns with {kind} ({len(samples)}): median {spent * 1e6:6.1f} us ({spent * 1e6 / unit:4.1f}x); "
            f"tokenizing {encoding * 1e6:5.1f} us ({encoding * 1e6 / unit:4.1f}x); "
            f"the rest {(spent - encoding) * 1e6:5.1f} us ({(spent - encoding) * 1e6 / unit:4.1f}x)"
        )


if __name__ == "__main__":
    main()
