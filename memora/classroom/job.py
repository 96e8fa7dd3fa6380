"""A reply that outlives the script run which asked for it: one turn on a thread the session owns.

Streamlit reruns the page's script on every click, and a rerun stops the run
that was streaming a reply; a reply streamed inside the script was therefore
thrown away by any click, though the model had already billed it. A
``ReplyJob`` runs the turn on its own thread instead: the model request and its
stream, the commit (``finish_turn``), then whatever ``after`` does (the page
folds the summary ahead of the next turn), all under the memory's lock. The
script only reads ``progress``, a frozen ``Progress`` swapped in whole, so a
read never blocks and never sees half an update.

Only ``cancel()`` (Stop, Reset, an import) ends a job early. A job whose page is
closed runs on: its reply is bounded by ``max_reply_tokens`` and is committed.
Nothing here imports Streamlit: the job never touches ``st.session_state``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, replace
from typing import Literal

from memora.memory import ShortTermMemory, SummaryVersion

Phase = Literal["replying", "summarizing", "done", "failed", "stopped"]
FINISHED: frozenset[Phase] = frozenset({"done", "failed", "stopped"})

AfterReply = Callable[[ShortTermMemory], object]
"""Run on the job's thread once the reply is committed (or at once, for a job with no turn); its
result is not used; may raise."""


def fold_ahead(memory: ShortTermMemory) -> SummaryVersion | None:
    """``memory.prefold()``, the ``after`` of every turn's job: folds now what the next turn is
    certain to fold.

    The memory decides, once, whether a fold is due. None when nothing is, and where the memory
    refuses to plan one (a session at its cap, a budget too small for any message): the next message
    is refused, with its reason, before anything is sent, so a fold refused now is no failure to
    report. Raises what the summary request raises (BackendError, SummaryError); the memory is then
    unchanged.
    """
    try:
        return memory.prefold()
    except ValueError:  # LimitReached and ContextBudgetError are ValueErrors; BackendError is not
        return None


@dataclass(frozen=True)
class Progress:
    """What a job has done so far, as the page draws it.

    ``phase``: ``replying`` (the stream is arriving), ``summarizing`` (the reply
    is committed and ``after`` runs), then ``done``, ``failed`` (the turn was
    rolled back; ``error`` says why) or ``stopped`` (cancelled before its
    commit; rolled back too). ``reply`` is the text streamed so far, the whole
    reply once committed, and what was streamed before a failure or a stop (the
    memory keeps none of it then). ``after_error`` is why ``after`` failed: the
    reply stands.
    ``base`` is the history's length when the job began: while ``replying``, the
    messages from ``base`` on (the pending user message) are the job's, drawn from here.
    """

    phase: Phase
    user_text: str | None
    base: int = 0
    reply: str = ""
    error: BaseException | None = None
    after_error: BaseException | None = None

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED


class ReplyJob:
    """One turn for ``user_text`` on a daemon thread, then ``after``; ``user_text=None`` runs only
    ``after``.

    A turn the memory refuses before sending (a cap, a budget) fails like any other, with the memory
    unchanged. ``on_end`` runs last on the job's thread, however the job ended (the page gives back
    the store room it booked for the turn), after the memory's lock is released.
    """

    def __init__(
        self,
        memory: ShortTermMemory,
        user_text: str | None,
        after: AfterReply | None = None,
        on_end: Callable[[], object] | None = None,
    ) -> None:
        self.memory = memory
        self._after = after
        self._on_end = on_end
        self._cancelled = threading.Event()
        self._skip_after = threading.Event()
        self._progress = Progress(
            "replying" if user_text is not None else "summarizing",
            user_text,
            base=len(memory.history),
        )
        self._thread = threading.Thread(target=self._run, name="memora-reply", daemon=True)

    def start(self) -> ReplyJob:
        self._thread.start()
        return self

    @property
    def progress(self) -> Progress:
        return self._progress

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Asks the job to stop at the reply's next piece; a reply already committed stands, and
        ``after`` is skipped.

        The stream is closed there (the model stops writing and billing); a
        request still waiting for its first byte ends at the backend's timeout.
        """
        self._cancelled.set()

    def skip_after(self) -> None:
        """Lets the reply finish and be committed, but skips ``after`` if it has not begun (a server
        shutting down has no time for a fold the next turn can do; one already under way runs to its
        end)."""
        self._skip_after.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Waits up to ``timeout_s`` for the job to finish; True when it has."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _publish(self, **changes) -> None:
        self._progress = replace(self._progress, **changes)

    def _run(self) -> None:
        try:
            self._turn_and_after()
        finally:
            if self._on_end is not None:
                self._on_end()

    def _turn_and_after(self) -> None:
        # One hold of the lock for reply, commit and fold: no other turn or fold of this memory
        # slips in between.
        with self.memory.lock:
            if self._progress.user_text is not None and not self._reply(self._progress.user_text):
                return
            if self._after is not None and not self.cancelled and not self._skip_after.is_set():
                try:
                    self._after(self.memory)
                except Exception as error:
                    # BackendError, SummaryError, or a bug: the next prepare() folds instead
                    self._publish(phase="done", after_error=error)
                    return
            self._publish(phase="done")

    def _reply(self, text: str) -> bool:
        """Streams and commits the turn; False (and published) when it failed or was stopped."""
        reply = ""
        try:
            with self.memory.turn(text) as turn, closing(turn.stream()) as stream:
                for piece in stream:
                    if self.cancelled:
                        break  # leaving closes the stream, then the turn rolls back
                    reply += piece
                    self._publish(reply=reply)
        except BaseException as error:
            # whatever ends the turn, the job must end too, or the page would wait on it forever
            self._publish(phase="failed", error=error)
            return False
        if not turn.committed:
            self._publish(phase="stopped")
            return False
        self._publish(phase="summarizing", reply=turn.reply or "")
        return True
