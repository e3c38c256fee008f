"""One client connection of the daemon (`cli/server.py`) and the replies sent on it."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from git_agentckpt.cli.daemon_child import Request


@dataclass(eq=False)
class Conn:
    """One client connection: reading its request, waiting for "G", or running its call."""

    sock: socket.socket
    deadline: float
    state: str = "read"  # read -> go -> run
    buf: bytearray = field(default_factory=bytearray)
    fds: list[int] = field(default_factory=list)
    req: Request | None = None
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
