"""A child process that dies with its parent and is out of the terminal's reach: what
``memora.serve`` starts.

Two things go wrong with a plain ``subprocess.Popen`` under a supervisor:

- Killed with SIGKILL (or crashing), the supervisor leaves its children running, unmanaged, their
  ports bound, and the next start meets them. On Linux each child here asks the kernel for SIGTERM
  when its parent dies (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec), so it stops as a
  stop by hand stops it: a Streamlit process drains its replies within its grace, Caddy closes. A
  watchdog pipe would need the child to read it, which Caddy cannot, or a relay process per child;
  the kernel's signal needs neither and still fires on SIGKILL.
- A child in its parent's process group gets whatever the terminal sends the group: SIGHUP when the
  terminal closes (Streamlit has no handler for it, so it dies with no grace) and Ctrl-C's SIGINT,
  which would reach each process beside the supervisor's own SIGTERM, a second signal that cuts its
  grace short. Each child gets a session of its own (``start_new_session``), so signals reach it
  only from its supervisor.

Edge cases: the death signal follows the parent *thread* that forked, so ``spawn`` refuses to run
outside the main thread, which lives as long as the process. A parent that dies between the fork and
the ``prctl`` is caught by comparing the parent's pid afterwards: the child then exits before it
execs. Linux clears the death signal when the child execs a set-user-ID binary or one with file
capabilities (a ``caddy`` given ``cap_net_bind_service``, as some packages do): such a child
outlives a killed supervisor, and the next start refuses its port, naming it. Elsewhere than Linux,
children get their own session and no death signal.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

PR_SET_PDEATHSIG = 1
"""From ``<linux/prctl.h>``."""


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once in the parent: the child, between fork and exec, only calls
    it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def spawn(
    command: Sequence[str], environ: Mapping[str, str], **options: object
) -> subprocess.Popen:
    """``subprocess.Popen(command, env=environ, **options)`` in a session of its own, with SIGTERM
    when this process dies where the platform offers it. Raises RuntimeError outside the main thread
    (the death signal would follow that thread, not the process)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "memora.app.children.spawn runs in the main thread only: the death signal follows the "
            "thread that forks"
        )
    before_exec = _die_with(os.getpid()) if _PRCTL is not None else None
    return subprocess.Popen(
        list(command), env=dict(environ), start_new_session=True, preexec_fn=before_exec, **options
    )


def _die_with(parent: int) -> Callable[[], None]:
    """What the child runs between fork and exec: the death signal, then a check that the parent is
    still there."""
    prctl = _PRCTL
    assert prctl is not None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(
                1
            )  # the parent died before the signal was armed: nothing would ever stop this child

    return arm
