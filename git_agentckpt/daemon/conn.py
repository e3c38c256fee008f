"""One client connection of the daemon (`cli/server.py`): what arrives on it, and the
replies sent on it (protocol: `cli/launch.py`)."""

from __future__ import annotations

import array
import socket
from dataclasses import dataclass, field

from git_agentckpt.daemon.child import Request
from git_agentckpt.daemon.client import MAX_REQUEST

_FDS_SPACE = socket.CMSG_SPACE(3 * array.array("i").itemsize)


@dataclass(eq=False)
class Conn:
    """One client connection: reading its request, waiting for "G", or running its call."""

    sock: socket.socket
    deadline: float
    state: str = "read"  # read -> go -> run
    buf: bytearray = field(default_factory=bytearray)
    fds: list[int] = field(default_factory=list)
    req: Request | None = None
    payload: bytes = b""  # the request as sent (handed to the spare child as it is)
    pid: int = 0
    slot: int = -1  # its byte in the daemon's `after_reply.ReportedSlots` (-1: none)


def send(conn: Conn, kind: bytes, body: bytes | int | None = None) -> bool:
    if body is None:
        data = kind
    elif isinstance(body, int):
        data = kind + body.to_bytes(4, "big", signed=True)
    else:
        data = kind + len(body).to_bytes(4, "big") + body
    try:  # non-blocking: a reply is small, a client that does not read it loses it
        return conn.sock.send(data, socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT) == len(data)
    except OSError:
        return False


def passed_fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    """The file descriptors a message passed (`SCM_RIGHTS`), from `recvmsg`'s ancillary data."""
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return list(fds)


def receive(conn: Conn) -> str:
    """Read what arrived on `conn` (not running a call yet): "drop" (closed, malformed, or
    files where none belong), "go" ("G" with fds 0-2, now in `conn.req.fds`), "request"
    (a whole request, in `conn.payload`) or "more" (wait for the rest)."""
    try:
        data, ancdata, flags, _addr = conn.sock.recvmsg(65536, _FDS_SPACE)
    except BlockingIOError:
        return "more"
    except OSError:
        return "drop"
    conn.fds.extend(passed_fds(ancdata))
    if not data or flags & socket.MSG_CTRUNC or len(conn.fds) > 3:
        return "drop"
    if conn.state == "go":
        if data == b"G" and len(conn.fds) == 3 and conn.req is not None:
            conn.req.fds, conn.fds = conn.fds, []
            return "go"
        return "drop"
    if conn.fds:
        return "drop"  # files come with "G" only
    conn.buf += data
    if len(conn.buf) < 4:
        return "more"
    size = int.from_bytes(conn.buf[:4], "big")
    if size > MAX_REQUEST or len(conn.buf) > 4 + size:
        return "drop"
    if len(conn.buf) < 4 + size:
        return "more"
    conn.payload = bytes(conn.buf[4:])
    return "request"
