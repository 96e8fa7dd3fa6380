"""A server stopped mid-reply: give the replies being written a bounded time, then keep what cannot
finish.

Streamlit stops serving on SIGTERM, SIGINT (Ctrl-C) and SIGQUIT (its own signal handler calls
``Server.stop``), and the interpreter then exits. Reply jobs run on daemon threads, which that exit
would kill mid-stream: the student's message gone and the request's tokens never recorded. ``drain``
runs at exit instead (``install`` registers it with ``atexit``, which Python runs in the main thread
after Streamlit has stopped serving and before daemon threads are killed):

1. Every running reply gets up to ``grace_s`` (``MEMORA_SHUTDOWN_GRACE_S``) to finish; a reply that
   does is committed and saved by its keeper as always. No new summary starts meanwhile.
2. Those still running are cancelled: a streamed reply stops at its next piece, the guard records
   the request's spend (estimated, as for the page's Stop: ``memora.classroom.guard``), and the turn
   rolls back. They get ``UNWIND_S`` for that.
3. The message of each turn that did not commit is saved with its conversation as a *pending
   message* (``ConversationKeeper.save_pending``); the next visit puts it back in the input box,
   with a notice.
4. A conversation the store refused earlier (``dirty``) is tried once more (again every ``POLL_S``
   for up to ``RESAVE_S`` while the store does not answer: a PostgreSQL restart), and so are the
   server budget's settlements held in memory (``CappedSpend.write_held``; unwritten, their bookings
   stay counted at their largest cost, so the cap holds either way). A conversation still unsaved
   then is lost with the process: the line counts those conversations and their billed tokens, and
   an error line says so, so a full disk at shutdown is never reported as "0 lost".

A second Ctrl-C or SIGTERM during the wait ends it at once (steps 2-4 still run, briefly), so a
teacher's laptop never hangs. With no reply running, the exit is as fast as before. One line says
what was waited for and one what came of it, in the server log; neither holds message text or ids. A
turn still waiting for the model's first byte after ``UNWIND_S`` cannot be unwound: its request
stays booked in the server budget at its largest cost (``memora.classroom.server_budget``), and its
message is kept on the stored copy when there is one the turn has not outdated (else the line counts
it as lost).
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memora.classroom.flights import FLIGHTS, Flight, Flights
from memora.classroom.grace import EXIT_MARGIN_S, UNWIND_S
from memora.classroom.server_budget import CappedSpend
from memora.classroom.store.base import StoreUnreachable

LOCK_WAIT_S = 1.0
"""How long saving a pending message waits for its memory's lock, which a turn that would not unwind
still holds."""
POLL_S = 0.1
RESAVE_S = EXIT_MARGIN_S / 2
"""How long step 4 tries again the conversations whose save the store did not answer
(``StoreUnreachable``), within the exit's margin (half of it, leaving the rest for the held spend
and the exit): a PostgreSQL restart during the grace takes a few seconds (2.3 s in
docs/classroom.md's runs), and a save tried once while it was down was lost with the process, the
student's reply and message with it."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Drained:
    """What ``drain`` did: replies ``finished`` within the grace, ``stopped`` at its end, pending
    messages ``kept`` and ``lost``, unsaved conversations ``resaved`` and those ``unsaved`` still
    (lost with the process), with their ``unsaved_tokens`` (billed, not in the store); ``waited_s``
    in all."""

    finished: int = 0
    stopped: int = 0
    kept: int = 0
    lost: int = 0
    resaved: int = 0
    unsaved: int = 0
    unsaved_tokens: int = 0
    waited_s: float = 0.0


def drain(
    flights: Flights,
    grace_s: float,
    *,
    unwind_s: float = UNWIND_S,
    interrupted: threading.Event | None = None,
    ledger: CappedSpend | None = None,
) -> Drained:
    """Steps 1-4 above for every flight in ``flights`` and the server budget's ``ledger``; returns
    at once when no flight is running or unsaved (after writing the ledger's held settlements, if
    any)."""
    began = time.monotonic()
    interrupted = interrupted or threading.Event()
    running = flights.running()
    unsaved = flights.unsaved()
    if not running and not unsaved:
        _write_held(ledger)
        return Drained()
    if running:
        log.warning(
            "Memora: waiting up to %.0f s for %d reply(ies) to finish (Ctrl-C again to stop "
            "waiting).",
            grace_s,
            len(running),
        )
    for flight in running:
        flight.job.skip_after()
    _wait(running, began + grace_s, interrupted)
    late = [flight for flight in running if flight.running]
    for flight in late:
        flight.job.cancel()
    _wait(late, time.monotonic() + unwind_s, threading.Event())
    kept = lost = 0
    for flight in running:
        text = _unanswered(flight)
        if text is None:
            continue
        if flight.keeper.memory is flight.job.memory and flight.keeper.save_pending(
            text, timeout_s=LOCK_WAIT_S
        ):
            kept += 1
        else:
            lost += 1
    resaved = flights.resave() + _resave_while_unreachable(flights, interrupted)
    left = flights.unsaved()
    _write_held(ledger)
    drained = Drained(
        len(running) - len(late),
        len(late),
        kept,
        lost,
        resaved,
        len(left),
        sum(flight.keeper.unsaved_tokens() for flight in left),
        time.monotonic() - began,
    )
    _log(drained)
    return drained


def _log(drained: Drained) -> None:
    log.warning(
        "Memora: %d reply(ies) finished, %d stopped; %d unanswered message(s) kept for the next "
        "visit, %d lost; %d unsaved conversation(s) saved now, %d could not be saved; %.1f s.",
        drained.finished,
        drained.stopped,
        drained.kept,
        drained.lost,
        drained.resaved,
        drained.unsaved,
        drained.waited_s,
    )
    if drained.unsaved:
        log.error(
            "Memora: %d conversation(s) could not be saved before exit (the storage still fails): "
            "their latest turns, %s billed tokens, are lost; the server budget still counts their "
            "requests (at their largest cost where a bill could not be written).",
            drained.unsaved,
            f"{drained.unsaved_tokens:,}",
        )


def _resave_while_unreachable(flights: Flights, interrupted: threading.Event) -> int:
    """Tries the unsaved flights again every ``POLL_S`` while one of them failed because the store
    did not answer, up to ``RESAVE_S`` or a second Ctrl-C; returns how many it saved. Edge case: a
    store that answered with an error (a full disk, say) is not waited on: it would fail the same
    way."""
    deadline = time.monotonic() + RESAVE_S
    resaved = 0
    while any(isinstance(flight.keeper.failure, StoreUnreachable) for flight in flights.unsaved()):
        if interrupted.is_set() or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
        resaved += flights.resave()
    return resaved


def _write_held(ledger: CappedSpend | None) -> None:
    if ledger is not None and not ledger.write_held():
        log.warning(
            "Memora: the server budget's held spend could not be written; those requests stay "
            "booked at their largest cost."
        )


def _wait(flights: list[Flight], deadline: float, interrupted: threading.Event) -> None:
    for flight in flights:
        while not interrupted.is_set() and not flight.job.wait(
            max(0.0, min(POLL_S, deadline - time.monotonic()))
        ):
            if time.monotonic() >= deadline:
                return


def _unanswered(flight: Flight) -> str | None:
    """The user's text of a turn that never committed (stopped, failed or stuck); None for one that
    did."""
    progress = flight.job.progress
    if progress.user_text is None or progress.phase in ("summarizing", "done"):
        return None
    return progress.user_text


_installed = threading.Lock()
_exit_settings: list[tuple[float, CappedSpend | None]] = []


def install(grace_s: float, ledger: CappedSpend | None = None) -> None:
    """Registers the drain to run at exit, once per process; the first call's ``grace_s`` and
    ``ledger`` hold (both are the server's: ``MEMORA_SHUTDOWN_GRACE_S`` and
    ``MEMORA_MAX_SERVER_TOKENS``)."""
    with _installed:
        if _exit_settings:
            return
        _exit_settings.append((grace_s, ledger))
    atexit.register(_at_exit)


def _at_exit() -> None:
    grace_s, ledger = _exit_settings[0]
    interrupted = threading.Event()
    with _interruptible(interrupted):
        drain(FLIGHTS, grace_s, interrupted=interrupted, ledger=ledger)


class _interruptible:
    """While draining in the main thread, a second SIGINT or SIGTERM sets ``interrupted`` instead of
    being lost."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, interrupted: threading.Event) -> None:
        self.interrupted = interrupted
        self.previous: dict[int, Callable | int | None] = {}

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for number in self.SIGNALS:
            self.previous[number] = signal.signal(number, lambda *_: self.interrupted.set())

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)
