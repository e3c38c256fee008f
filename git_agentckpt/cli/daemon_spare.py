"""The daemon's spare child: forked between calls, handed the next call whole.

Forking the daemon (~48 MB of Python, pygit2 and every module preloaded) costs
~1.9 ms, and the child's start (its signals, closing what the daemon holds,
the first copy-on-write faults) ~1.3 ms more: a twelfth of a served resume,
spent while the caller waits. So when the daemon is idle (no connection, no
call running, no background work queued) it forks one child ahead (`Spares`),
which does all of that, takes its copy-on-write faults ahead (`cli/prefault.py`:
~7-10 ms of a served resume; it stops at once when its call arrives), and then
blocks on a socket pair (`SOCK_SEQPACKET`). When a call's "G" arrives, the daemon
sends it the call in one message (`hand_over`): the request as the client sent
it, its slot in `daemon_child.ReportedSlots`, what the plug-ins saw since the
fork, and the client's socket and fds 0-2 as `SCM_RIGHTS`. From there on the
spare is that call's child, exactly as a child forked for it would be
(`run_child`).

A spare must not start a call with an older picture of the world than a child
forked at "G" would have:

- Each plug-in that keeps state the child reads registers a `Sync`
  (`Daemon.spares.syncs`): `mark()` at the spare's fork, `since(mark)` at the
  hand-over (what changed since, as JSON; None when too much did: the daemon
  then forks as before) and `catch_up(update)` in the spare. The work-tree
  watcher's is the paths changed after the spare's fork (`cli/daemon_watch.py`).
- The daemon retires the spare once a call ends (the read-ahead of the cache
  files runs next, `cli/daemon_warm.py`) and forks a new one when idle again.

The spare ends on its own when the daemon goes (end of file on its socket),
and is killed when the daemon retires it or stops. `GIT_CKPT_DAEMON_SPARE=off`
in the daemon's environment turns it off (every call forks, as before).
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from git_agentckpt.cli.daemon_child import (
    ReportedSlots,
    Request,
    child_failed,
    end_child,
    freeze_inherited,
    own_signals,
    parse_request,
    run_child,
)
from git_agentckpt.cli.daemon_conn import passed_fds
from git_agentckpt.cli.daemon_find import OFF_WORDS
from git_agentckpt.cli.launch import INTERNAL
from git_agentckpt.cli.prefault import prefault

_HANDED_FDS = 4  # the client's socket, then its fds 0-2
_FDS_SPACE = socket.CMSG_SPACE(_HANDED_FDS * array.array("i").itemsize)
_HEADER = 8  # the slot (4 bytes, signed), the length of the plug-ins' update (4 bytes)
# What the spare reads at once. A message is also bounded by the socket's send buffer
# (`net.core.wmem_max`, ~208 KiB by default): a larger call (a huge environment) fails
# to send, and the daemon forks a child for it instead.
MAX_MESSAGE = 1 << 20


@dataclass
class Sync:
    """What a plug-in's state the spare must catch up on (see the module doc)."""

    mark: Callable[[], object]
    since: Callable[[object], object | None]
    catch_up: Callable[[object], None]


@dataclass
class Spare:
    pid: int
    chan: socket.socket  # the daemon's end
    marks: dict[str, object] = field(default_factory=dict)

    def retire(self) -> None:
        """Kill it (the daemon reaps it with its other children)."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self.chan.close()


MAX_LOST = 8  # spares that died unused before the daemon stops making them


def enabled(env: dict[str, str]) -> bool:
    return env.get("GIT_CKPT_DAEMON_SPARE", "").strip().lower() not in OFF_WORDS


class Spares:
    """The daemon's side: at most one spare at a time, and what became of them."""

    def __init__(self, env: dict[str, str]) -> None:
        self.on = enabled(env)
        self.spare: Spare | None = None
        self.syncs: dict[str, Sync] = {}  # plug-ins' state a spare must catch up on
        self.counts = {"forked": 0, "used": 0, "lost": 0}

    def wanted(self) -> bool:
        return self.on and self.spare is None

    def make(
        self,
        leave_daemon: Callable[[socket.socket], None],
        hooks: Sequence[Callable[[], None]],
        slots: ReportedSlots,
        forwarded: Iterable[int],
    ) -> None:
        self.spare = fork_spare(self.syncs, leave_daemon, hooks, slots, forwarded)
        if self.spare is None:
            self.on = False  # the fork fails: each call forks (and says why) as before
        else:
            self.counts["forked"] += 1

    def retire(self) -> None:
        if self.spare is not None:
            self.spare.retire()
            self.spare = None

    def close_in_child(self) -> None:
        """In a child forked later: the daemon's end of the spare's socket is not ours."""
        if self.spare is not None:
            self.spare.chan.close()

    def take(self, payload: bytes, slot: int, fds: Sequence[int]) -> int | None:
        """Hand a call to the spare: its pid once it has taken it; None: fork one."""
        spare, self.spare = self.spare, None
        if spare is None:
            return None
        if not hand_over(spare, self.syncs, payload, slot, fds):
            spare.retire()
            return None
        spare.chan.close()
        self.counts["used"] += 1
        return spare.pid

    def reaped(self, pid: int) -> None:
        """A child the daemon reaped that ran no call: when it was the spare, it died
        unused (after MAX_LOST of them, no more spares)."""
        if self.spare is None or pid != self.spare.pid:
            return
        self.spare.chan.close()
        self.spare = None
        self.counts["lost"] += 1
        self.on = self.on and self.counts["lost"] < MAX_LOST

    def status(self) -> dict[str, object]:
        return {"pid": self.spare.pid if self.spare else None, **self.counts}


def fork_spare(
    syncs: dict[str, Sync],
    leave_daemon: Callable[[socket.socket], None],
    hooks: Sequence[Callable[[], None]],
    slots: ReportedSlots,
    forwarded: Iterable[int],
) -> Spare | None:
    """Fork a spare (in the daemon, when idle); None if the fork failed.

    `leave_daemon(chan)` closes, in the spare, what the daemon holds but `chan`."""
    marks = {name: sync.mark() for name, sync in syncs.items()}
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return None
    if pid == 0:
        ours.close()
        _spare_main(theirs, syncs, lambda: leave_daemon(theirs), hooks, slots, forwarded)
    theirs.close()
    with contextlib.suppress(OSError):  # also done by the spare: whichever runs first
        os.setpgid(pid, pid)
    return Spare(pid, ours, marks)


def hand_over(
    spare: Spare, syncs: dict[str, Sync], payload: bytes, slot: int, fds: Sequence[int]
) -> bool:
    """Send the call (`payload` as the client sent it, `fds`: its socket, then its
    fds 0-2) to `spare`; False when it cannot take it (the daemon then forks)."""
    updates: dict[str, object] = {}
    for name, sync in syncs.items():
        update = sync.since(spare.marks.get(name))
        if update is None:
            return False
        updates[name] = update
    body = json.dumps(updates, separators=(",", ":")).encode()
    header = slot.to_bytes(4, "big", signed=True) + len(body).to_bytes(4, "big")
    rights = array.array("i", fds).tobytes()
    try:
        sent = spare.chan.sendmsg(
            [header, body, payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)]
        )
    except OSError:
        return False
    return sent == len(header) + len(body) + len(payload)


def _spare_main(
    chan: socket.socket,
    syncs: dict[str, Sync],
    leave_daemon: Callable[[], None],
    hooks: Sequence[Callable[[], None]],
    slots: ReportedSlots,
    forwarded: Iterable[int],
) -> NoReturn:
    """The spare, from its fork to its exit: ready, then waits for one call."""
    freeze_inherited()
    try:
        own_signals(forwarded)
        leave_daemon()
        for hook in hooks:
            hook()
        prefault(lambda: _readable(chan))  # idle: take the copy-on-write faults now
        call = _wait_for_call(chan, syncs)
    except BaseException:  # a Ctrl-C, a damaged message: no call taken
        os._exit(0)
    if call is None:
        os._exit(0)  # the daemon went or retired us
    own, req, slot = call
    code = INTERNAL
    try:
        code = run_child(req)
    except BaseException as exc:  # reported on the caller's stderr
        child_failed(exc)
    finally:
        end_child(own, code, slots, slot)


def _readable(chan: socket.socket) -> bool:
    return bool(select.select([chan], [], [], 0)[0])


def _wait_for_call(chan: socket.socket, syncs: dict[str, Sync]) -> tuple[int, Request, int] | None:
    """Block until the daemon sends a call: (client socket fd, request, slot); None at
    end of file. The plug-ins' updates are applied before it returns."""
    data, ancdata, flags, _ = chan.recvmsg(MAX_MESSAGE, _FDS_SPACE)
    fds = passed_fds(ancdata)
    chan.close()
    if not data:
        return None
    if (
        len(fds) != _HANDED_FDS
        or len(data) < _HEADER
        or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
    ):
        raise ValueError("damaged hand-over")
    slot = int.from_bytes(data[:4], "big", signed=True)
    size = int.from_bytes(data[4:8], "big")
    updates = json.loads(data[_HEADER : _HEADER + size])
    for name, update in updates.items():
        syncs[name].catch_up(update)
    req = parse_request(data[_HEADER + size :])
    req.fds = fds[1:]
    return fds[0], req, slot
