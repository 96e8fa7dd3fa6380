"""Who holds a room booking, by name, and whether that holder's process still runs on this machine.

A turn's room booking is held under a name (``base.RoomRequest``'s ``holder``) that says which
machine and process made it, so that a booking left by a process killed mid-reply can be told from a
live one without waiting for its lease (``base.BOOKING_LEASE_S``): SQLite, a file of one machine,
asks the kernel whether the pid still runs. PostgreSQL uses a presence lock instead (``presence``).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable

_MACHINE = socket.gethostname()


def new_holder() -> str:
    """A name for a new room-booking holder: this machine and process, then a random part. A process
    killed mid-reply (SIGKILL, out of memory) cannot give its bookings back; the name lets the next
    booking made on this machine see that its process is gone (``dead_holders``)."""
    return f"{_MACHINE}:{os.getpid()}:{secrets.token_urlsafe(16)}"


def dead_holders(holders: Iterable[str]) -> list[str]:
    """The holders among ``holders`` named by ``new_holder`` on this machine for a process that has
    exited: their bookings would otherwise hold room, and make the conversation look busy to its
    next turn, until the lease ends. A holder of another machine, or with a name of another form, is
    never taken for dead: its lease decides."""
    dead = []
    for holder in holders:
        machine, _, rest = holder.partition(":")
        pid = rest.partition(":")[0]
        if machine == _MACHINE and pid.isdigit() and not _running(int(pid)):
            dead.append(holder)
    return dead


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True
