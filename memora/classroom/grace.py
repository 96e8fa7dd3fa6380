"""The timing of a stop, derived from one setting: ``MEMORA_SHUTDOWN_GRACE_S``.

A process told to stop (SIGTERM, Ctrl-C, a rolling restart) gives the replies it is writing the
*grace* to finish and be saved, then ``UNWIND_S`` for those it cancels to roll back
(``memora.classroom.shutdown``), then a few seconds to keep what is left and exit. Every other wait
for a stopping process is derived from that grace here, so that no two places disagree about it:

- after a PostgreSQL restart, a turn's holder without its presence lock is taken for alive
  ``turn_outlives_stop_s(grace)`` (a tab waits for a turn running elsewhere while its holder lives,
  ``memora.classroom.store.presence``);
- ``memora.serve`` waits ``exit_within_s(grace)`` for a process it stopped before it kills it.

The grace is bounded by ``MAX_SHUTDOWN_GRACE_S``: each of those waits grows with it, and a rolling
restart takes one such wait per process at worst.
"""

from __future__ import annotations

DEFAULT_SHUTDOWN_GRACE_S = 5.0
"""Long enough for most replies under way (a 1,000-token cap streams in 5-15 s from a hosted model,
and a reply is usually part-way), yet, with ``UNWIND_S`` after it, under the 10 s that ``docker
stop`` waits before SIGKILL, which would keep nothing at all. systemd (90 s) and Kubernetes (30 s)
allow a longer grace."""
MAX_SHUTDOWN_GRACE_S = 300
"""Five minutes: above systemd's 90 s and any reply a classroom's caps let a model stream.
``memora.serve`` honours any grace up to it (it waits ``exit_within_s``); a larger one would make a
rolling restart of N processes wait up to N times as long for processes whose replies never end."""
UNWIND_S = 3.0
"""After the grace: a cancelled stream stops at its next piece, which a streaming model sends many
times a second."""
EXIT_MARGIN_S = 10.0
"""After the unwind: each unanswered message saved for the next visit (up to a second each for its
memory's lock), unsaved conversations tried once more, the server budget's held spend written, and
the interpreter's exit, on a machine busy with the other processes' students."""


def turn_outlives_stop_s(grace_s: float) -> float:
    """The longest a turn still runs after its process was told to stop: its grace, then the unwind.
    Past it the turn has been saved, or rolled back (its message kept for the next visit), or its
    process is gone."""
    return grace_s + UNWIND_S


def exit_within_s(grace_s: float) -> float:
    """How long a process stopped with ``grace_s`` may take to exit: the turns' time
    (``turn_outlives_stop_s``) and ``EXIT_MARGIN_S``. A supervisor that kills it sooner loses
    replies the grace promised to keep."""
    return turn_outlives_stop_s(grace_s) + EXIT_MARGIN_S
