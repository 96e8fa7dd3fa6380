"""A reload (F5) during a reply: the new tab takes the reply over instead of forking.

A reload starts a new session. The old one's reply job runs on and commits under the conversation's
id, so a new session restored from the store would show the conversation without that reply, and its
next save, built on the older version, would fork. Instead, every job is registered with its keeper
in ``memora.classroom.flights.FLIGHTS``, and a session opening an id with a job still running there
*adopts* it:

1. While the job runs, the new session shows the same memory and job as the old one (the reply goes
   on streaming, with its Stop button), and saves through the same keeper.
2. Once the job has finished (its reply committed and saved, or stopped, or failed), the session
   copies the conversation into its own memory and keeper (``reopen.reopen_live``), at the version
   the old keeper saved: its next save follows that version, so there is no fork. It continues with
   its own backend and caps, as after any restore.

An id whose last save the store refused (``dirty``: the live memory is newer than the store) is
copied the same way at once, so a reload loses nothing while the store is down. The copy then takes
the flight's place in ``FLIGHTS`` (``hand_over``) until a save succeeds, so a second reload, or the
tab closed and opened again, is given the copy, not the store's older one. Only the browser that
owns the conversation (``keeper.owner``) can adopt it: another browser's link opens a new one, as a
restore from the store would. Only one process sees its own jobs: with several processes behind a
proxy, a reload routed to another process restores the store's copy, as before (sticky sessions
avoid that; docs/classroom.md).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from memora.app.page import state as keys
from memora.app.page.i18n import LANGUAGES
from memora.app.page.state import Notice
from memora.app.settings import Settings
from memora.classroom.flights import FLIGHTS, Flight
from memora.classroom.job import ReplyJob
from memora.classroom.shutdown import install as install_shutdown
from memora.classroom.store.base import StoreUnreachable
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.reopen import Reopened, reopen_live
from memora.memory import ShortTermMemory


def track(job: ReplyJob, url_param: str) -> None:
    """Registers ``job`` with the session's keeper, so a reload or a shutdown finds it.

    A conversation not saved yet (its first reply) gets its id into the URL now, under
    ``url_param``, so that a reload during that reply knows which conversation to adopt.
    """
    state = st.session_state
    settings: Settings = state[keys.SETTINGS]
    install_shutdown(settings.shutdown_grace_s, settings.server_ledger)
    keeper: ConversationKeeper | None = state[keys.CONVERSATION]
    if keeper is None or keeper.memory is not job.memory:
        return
    FLIGHTS.add(job, keeper)
    if (
        job.progress.user_text is not None
        and st.query_params.get(url_param) != keeper.conversation_id
    ):
        st.query_params[url_param] = keeper.conversation_id


def turn_ended(keeper: ConversationKeeper) -> None:
    """A turn's job has ended (on its thread): the store room booked for it is given back and, when
    the turn was saved (so the store works), the conversations this process still holds unsaved are
    tried again.

    A turn whose save the store did not answer (``StoreUnreachable``: PostgreSQL restarting) keeps
    its booking: to every other process its conversation still has a turn running, whose save is to
    come, so a page back elsewhere waits for it. Given back at once, the page sent and saved first,
    and the late save (a retry, the shutdown drain's) became a copy that her conversation lacks. The
    booking ends with that save (``ConversationKeeper.retry``), its process (its holder is then gone
    by the store's account) or its lease. A store that answered with an error (a full disk) gets the
    booking back at once: its save is not about to land, and a tab of the same conversation opened
    meanwhile would wait for it until the lease ends."""
    if keeper.dirty and isinstance(keeper.failure, StoreUnreachable):
        return
    keeper.release_room()
    if not keeper.dirty:
        FLIGHTS.resave()


def in_flight(keeper: ConversationKeeper) -> bool:
    """Whether a job of ``keeper``'s conversation is running in this process (its id belongs in the
    URL)."""
    return any(flight.keeper is keeper for flight in FLIGHTS.running())


def adopt(state: Any, requested_id: str | None, owner: str) -> ConversationKeeper | None:
    """On a session's first run: takes over ``requested_id`` when this process has it newer than the
    store and it is ``owner``'s (the hash of this browser's secret), the same rule as a restore from
    the store.

    Returns the keeper the session goes on with, or None when the store's copy is the one to open
    (or none).
    """
    flight = FLIGHTS.for_conversation(requested_id, owner)
    if flight is None:
        return None
    if not flight.running:
        restored = _copy(state, flight, state[keys.MEMORY])
        if restored is None:
            return None
        FLIGHTS.hand_over(flight, restored.keeper)
        state[keys.NOTICE] = Notice(
            "warning", "conversation.restored_unsaved", {"messages": len(restored.memory.history)}
        )
        return restored.keeper
    own: ShortTermMemory = state[keys.MEMORY]
    _use(state, flight.job.memory, flight.keeper.language)
    state[keys.REPLY_JOB] = flight.job
    state[keys.ADOPTED] = (flight, own)
    state[keys.NOTICE] = Notice("info", "conversation.adopted")
    return flight.keeper


def finish(state: Any) -> None:
    """Call on every run before the keeper is used: once an adopted job has finished, the session
    continues with its own copy of the conversation. Until then (and when the memory stays busy with
    another tab's turn) it goes on showing the shared one."""
    adopted: tuple[Flight, ShortTermMemory] | None = state[keys.ADOPTED]
    if adopted is None:
        return
    flight, own = adopted
    if flight.running or state[keys.REPLY_JOB] is flight.job:
        return
    restored = _copy(state, flight, own)
    if restored is None:
        return
    state[keys.ADOPTED] = None
    state[keys.CONVERSATION] = restored.keeper
    FLIGHTS.hand_over(flight, restored.keeper)


def _copy(state: Any, flight: Flight, session: ShortTermMemory) -> Reopened | None:
    settings: Settings = state[keys.SETTINGS]
    restored = reopen_live(flight.keeper, session, locked=settings.locked)
    if restored is None or restored.memory is None:
        return None
    restored.keeper.attach(restored.memory)
    _use(state, restored.memory, restored.language)
    return restored


def _use(state: Any, memory: ShortTermMemory, language: str | None) -> None:
    state[keys.MEMORY] = memory
    state[keys.BUDGET_INPUT] = memory.max_input_tokens
    state[keys.WINDOW_INPUT] = memory.max_recent_turns
    state[keys.FOLD_POLICY_INPUT] = memory.limits.fold_policy
    state[keys.PREFOLD_AT] = len(memory.history)  # as after a restore: opening it sends nothing
    if language in LANGUAGES:
        state[keys.LANG] = language
