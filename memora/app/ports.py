"""Who holds a TCP port: whether a server could listen there now, and which process listens there
(Linux's /proc).

``memora.serve`` asks both. Before it starts anything, each of its ports must be free (``taken``),
or it refuses, naming what holds the port (``holders``). A process it started is called ready only
once that process itself holds the listening socket (``listens``): whoever else answers on the port
(an orphan of an earlier start, say) does not count.

Edge cases: ``taken`` probes with ``SO_REUSEADDR``, as Streamlit's and Caddy's listeners bind, so a
stopped server's connections lingering in TIME_WAIT do not count as taken, while a listening socket,
or one bound without that option, does. An address that cannot be resolved or bound for another
reason (an address this machine lacks) is not called taken: the server's own start reports it. Where
/proc has no socket tables (not Linux), ``listens`` and ``holders`` return None: they cannot say.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"
"""A socket's state in /proc/net/tcp: TCP_LISTEN."""


def taken(host: str, port: int) -> bool:
    """Whether a server could not listen on ``host``:``port`` now because something holds it. An
    empty ``host`` means every address, IPv4 and IPv6, as Caddy's ``:8080`` does."""
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError):
        return False
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return True
    return False


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` itself holds a socket listening on TCP ``port`` (any address); None
    where /proc cannot say. False for a process that has exited."""
    sockets = _listening_sockets(port)
    if sockets is None:
        return None
    return bool(sockets & _sockets_of(pid))


def holders(port: int) -> list[tuple[int, str]] | None:
    """The processes holding a socket listening on TCP ``port``, as (pid, command name), that this
    user may see; None where /proc cannot say."""
    sockets = _listening_sockets(port)
    if sockets is None:
        return None
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and sockets & _sockets_of(int(entry.name)):
            found.append((int(entry.name), _command_name(entry)))
    return sorted(found)


def _listening_sockets(port: int) -> set[int] | None:
    """The inodes of the sockets listening on ``port``, over IPv4 and IPv6."""
    tables = [PROC / "net" / name for name in ("tcp", "tcp6")]
    if not any(table.exists() for table in tables):
        return None
    inodes = set()
    for table in tables:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # sl, local address (hex address:hex port), remote address, state, queues, timers,
            # retransmits, uid, timeout, inode
            if (
                len(fields) > 9
                and fields[3] == _LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(int(fields[9]))
    return inodes


def _sockets_of(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` has open; empty for a process that is gone or not
    this user's."""
    folder = PROC / str(pid) / "fd"
    inodes = set()
    try:
        descriptors = os.listdir(folder)
    except OSError:
        return inodes
    for descriptor in descriptors:
        try:
            target = os.readlink(folder / descriptor)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _command_name(process: Path) -> str:
    try:
        return (process / "comm").read_text().strip()
    except OSError:
        return "?"
