"""Whether the daemon may run a caller's call: only for its twin.

A call run by the daemon's child runs with the daemon's file system view,
namespaces, limits and privileges, not the caller's. So the daemon serves a
call only when the caller (the process that connected, `SO_PEERCRED`) has
exactly what the daemon has, read from `/proc/<pid>/…`:

- user, group and supplementary group ids (`status`: Uid, Gid, Groups: real,
  effective, saved and file-system ids);
- namespaces: user, mount, pid, network, ipc, uts, cgroup, time
  (`ns/*`: a caller in a container, an `unshare -m` sandbox or a read-only
  bind mount is run in its own process);
- root directory (`root`: a chroot) and working directory (`cwd`: the
  directory the request names must be the caller's own);
- cgroup (`cgroup`: memory, pids and cpu limits of a sandbox or a CI job);
- every resource limit (`limits`: `ulimit -f`, `-v`, `-n`, …);
- privileges: NoNewPrivs, Seccomp mode and filter count, the capability sets
  (CapInh, CapPrm, CapEff, CapBnd, CapAmb), and the LSM label
  (`attr/current`, SELinux or AppArmor) where the kernel shows one.

Known limits: a Landlock domain is not visible in /proc, so a caller confined
by Landlock alone (same everything else) is served with the daemon's freedom;
nor are the seccomp filters' contents (only their number). Nice value, CPU
affinity, I/O priority and OOM score are not compared (they change how fast a
call runs, not what it may do).

Race: the peer's pid is pinned with a pidfd (`SO_PEERPIDFD`, Linux 6.5+; else
`pidfd_open` right after the connection is accepted) and the pidfd is checked
to still be alive after everything was read, so the files read belong to
that process and not to a later one that reused its pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from dataclasses import dataclass

SO_PEERCRED = 17
SO_PEERPIDFD = 77
NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time")
NAMESPACE_NAMES = {
    "user": "user namespace",
    "mnt": "mount namespace",
    "pid": "pid namespace",
    "net": "network namespace",
    "ipc": "ipc namespace",
    "uts": "uts namespace",
    "cgroup": "cgroup namespace",
    "time": "time namespace",
}
STATUS_FIELDS = (
    "Uid",
    "Gid",
    "Groups",
    "NoNewPrivs",
    "Seccomp",
    "Seccomp_filters",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
)


@dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int


def peer_of(conn: socket.socket) -> Peer:
    cred = conn.getsockopt(socket.SOL_SOCKET, SO_PEERCRED, 12)
    pid, uid, gid = (int.from_bytes(cred[i : i + 4], sys.byteorder) for i in (0, 4, 8))
    return Peer(pid, uid, gid)


def pidfd_of(conn: socket.socket, pid: int) -> int:
    """A pidfd of the process that connected (OSError if it cannot be had)."""
    try:
        return conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return os.pidfd_open(pid)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "<none>"
    except OSError as exc:
        if exc.errno in (22, 95):  # EINVAL/EOPNOTSUPP: no LSM shows a label
            return "<none>"
        raise


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except FileNotFoundError:
        return "<none>"


def identity(proc: str) -> dict[str, str]:
    """What must be equal, for `/proc/self` or `/proc/<pid>` (OSError when unreadable)."""
    return _fixed(proc) | _movable(proc)


def _fixed(proc: str) -> dict[str, str]:
    """What a process cannot have changed from outside: namespaces, root, privileges."""
    found: dict[str, str] = {}
    for ns in NAMESPACES:
        found[NAMESPACE_NAMES[ns]] = _link(f"{proc}/ns/{ns}")
    root = os.stat(f"{proc}/root")
    found["root directory"] = f"{_link(f'{proc}/root')} {root.st_dev}:{root.st_ino}"
    fields = dict(
        (k, " ".join(v.split()))
        for k, _, v in (line.partition(":") for line in _read(f"{proc}/status").splitlines())
    )
    for key in STATUS_FIELDS:
        found[f"privileges ({key})"] = fields.get(key, "<none>")
    found["security label"] = _read(f"{proc}/attr/current").strip("\0\n ")
    return found


def _movable(proc: str) -> dict[str, str]:
    """What others can change under a process: its cgroup (moved) and limits (prlimit)."""
    found = {"cgroup": _read(f"{proc}/cgroup")}
    for line in _read(f"{proc}/limits").splitlines()[1:]:
        name = line[:26].strip()
        if name:
            found[f"resource limit ({name})"] = " ".join(line[26:].split())
    return found


_OWN_FIXED: dict[str, str] = {}


def own_identity() -> dict[str, str]:
    """This process's identity; the fixed part is read once (the daemon never changes it)."""
    if not _OWN_FIXED:
        _OWN_FIXED.update(_fixed("/proc/self"))
    return _OWN_FIXED | _movable("/proc/self")


def difference(mine: dict[str, str], theirs: dict[str, str]) -> str | None:
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            return f"{key} differs"
    return None


def refusal(conn: socket.socket, cwd: str) -> str | None:
    """Why the caller on `conn` must run its call itself, or None: it is our twin."""
    try:
        peer = peer_of(conn)
    except OSError as exc:
        return f"cannot identify the caller: {exc.strerror}"
    if peer.uid != os.getuid():
        return "another user"
    if peer.pid <= 0:
        return "the caller's process is not visible from the daemon's pid namespace"
    try:
        pidfd = pidfd_of(conn, peer.pid)
    except OSError as exc:
        return f"cannot pin the caller's process: {exc.strerror}"
    try:
        proc = f"/proc/{peer.pid}"
        try:
            theirs = identity(proc)
            here, there = os.stat(cwd), os.stat(f"{proc}/cwd")
        except OSError as exc:
            return f"cannot read the caller's {exc.filename or 'process'}: {exc.strerror}"
        why = difference(own_identity(), theirs)
        if why is None and (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            why = "working directory differs from the caller's own"
        try:
            signal.pidfd_send_signal(pidfd, 0)
        except ProcessLookupError:
            return "the caller ended"
        except OSError:
            pass  # alive (EPERM and the like)
        return why
    finally:
        with contextlib.suppress(OSError):
            os.close(pidfd)
