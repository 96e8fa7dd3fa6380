"""The reply jobs running in this server process, by conversation: what a reload adopts and a
shutdown waits for.

A reply job (``memora.classroom.job``) belongs to the page session that started it, but it outlives
that session's script run, and a reload (F5) makes a new session. ``FLIGHTS`` lets the new session
find the job its conversation is still waiting on, and lets the process, when it is stopped, find
every reply still being written. A flight is the job and the ``ConversationKeeper`` that saves its
memory.

A finished flight is forgotten, unless its keeper still holds changes the store refused (``dirty``):
the live memory is then newer than the store, and a reload must be given it, not the store's copy.
Such a flight is forgotten only once a save succeeds. A reload that takes the conversation over
hands the flight to its own copy (``hand_over``): the process then holds that copy instead, for the
next reload, a closed tab's reopening, the next successful save (``resave``) or the shutdown drain,
however many reloads come first. A deleted conversation's flights, and a forgotten browser's, are
dropped at once (``forget_conversation``, ``forget_owner``): nothing of them is handed to a reload
or saved back. Nothing here imports Streamlit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from memora.classroom.job import ReplyJob
from memora.classroom.store.keeper import ConversationKeeper
from memora.memory import ShortTermMemory


@dataclass(frozen=True)
class Flight:
    """One reply job and the keeper that saves the memory it runs on; or, handed over by a reload
    (``job`` None), the keeper of the reloaded page's copy and the memory it ``held`` when it was
    handed over."""

    job: ReplyJob | None
    keeper: ConversationKeeper
    held: ShortTermMemory | None = None

    @property
    def memory(self) -> ShortTermMemory | None:
        return self.held if self.job is None else self.job.memory

    @property
    def running(self) -> bool:
        return self.job is not None and not self.job.progress.finished

    @property
    def unsaved(self) -> bool:
        """Whether the keeper holds changes the store refused, still on this flight's memory (not
        one a Reset replaced)."""
        return self.keeper.dirty and self.keeper.memory is self.memory


class Flights:
    """A process-wide, thread-safe set of flights; each method forgets the flights that are over
    first."""

    def __init__(self) -> None:
        self._flights: list[Flight] = []
        self._lock = threading.Lock()

    def add(self, job: ReplyJob, keeper: ConversationKeeper) -> Flight:
        flight = Flight(job, keeper)
        with self._lock:
            # A newer job on the same memory supersedes the last one's entry: one flight per memory.
            self._flights = [f for f in self._live() if f.memory is not job.memory] + [flight]
        return flight

    def for_conversation(self, conversation_id: str | None, owner: str) -> Flight | None:
        """The flight a reload of ``owner``'s ``conversation_id`` must continue: its job still runs,
        or its memory is unsaved.

        None for no id, for another owner's conversation (nothing of it is handed out), or when this
        process has nothing newer than the store for it.
        """
        if not conversation_id:
            return None
        with self._lock:
            live = self._live()
        matching = [
            f
            for f in live
            if f.keeper.conversation_id == conversation_id and f.keeper.owner == owner
        ]
        return matching[-1] if matching else None

    def running(self) -> list[Flight]:
        """The flights whose job has not finished, oldest first."""
        with self._lock:
            return [f for f in self._live() if f.running]

    def unsaved(self) -> list[Flight]:
        """The finished flights whose keeper holds changes the store refused."""
        with self._lock:
            return [f for f in self._live() if not f.running and f.unsaved]

    def hand_over(self, flight: Flight, keeper: ConversationKeeper) -> None:
        """Replaces finished ``flight`` with ``keeper``, a reload's copy of its conversation: while
        that copy is unsaved the process holds it, so the next reload (or a reopened tab) is given
        it, not the store's older copy; it is forgotten once a save succeeds. A copy with nothing
        unsaved is not kept."""
        handed = Flight(None, keeper, keeper.memory)
        with self._lock:
            self._flights = [handed if f is flight else f for f in self._flights]
            self._live()

    def resave(self) -> int:
        """Tries once more to save every finished flight still unsaved (the store has just taken a
        save, so it may be back); never waits for a turn. Returns how many are saved now."""
        return sum(1 for flight in self.unsaved() if flight.keeper.retry())

    def forget_conversation(
        self, conversation_id: str, owner: str, deleted_by: ConversationKeeper | None = None
    ) -> list[Flight]:
        """Drops every flight of ``owner``'s ``conversation_id``, which was deleted: a reload of its
        old address is then given nothing of it, and the shutdown drain does not save it back. Their
        jobs are cancelled (a reply another tab was writing on it is not kept) and their keepers let
        go of their memories, so a late commit saves nothing. ``deleted_by`` is the keeper that
        deleted it: it holds a new id already, and its flights go too, or a job still running on the
        deleted memory would be handed to a reload of that new id. Returns the flights dropped."""
        return self._drop(
            lambda f: (
                f.keeper is deleted_by
                or (f.keeper.conversation_id == conversation_id and f.keeper.owner == owner)
            )
        )

    def forget_owner(self, owner: str) -> list[Flight]:
        """As ``forget_conversation``, for every conversation of ``owner`` (a browser that is
        forgotten)."""
        return self._drop(lambda f: f.keeper.owner == owner)

    def _drop(self, matches: Callable[[Flight], bool]) -> list[Flight]:
        with self._lock:
            dropped = [f for f in self._live() if matches(f)]
            self._flights = [f for f in self._flights if not matches(f)]
        for flight in dropped:
            if (
                flight.job is not None
            ):  # a reload's handed-over copy has no job, only a keeper to let go
                flight.job.cancel()
            flight.keeper.let_go()
        return dropped

    def _live(self) -> list[Flight]:
        self._flights = [f for f in self._flights if f.running or f.unsaved]
        return list(self._flights)


FLIGHTS = Flights()
"""This process's flights: one Streamlit server runs every session's jobs in its threads."""
