"""Which daemon serves a work tree: the one holding `<git dir>/agent/daemon.lock`.

A new daemon takes the lock (flock) before its imports. If another holds it:
one of the same fingerprint is left alone (this one exits); a stale one (another
version or installation) is asked to stop, and the lock is taken when it lets
go. A socket must also be bindable there (not every file system has them),
tried before the imports too, so a repository where no daemon can live costs a
short-lived process, not a full start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time

from git_agentckpt.daemon import client
from git_agentckpt.daemon import find as daemon_find

REPLACE_SECONDS = 10.0  # how long a new daemon waits for a stale one to let go


def _lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _replace(git_dir: str, fp: str, lockfd: int) -> bool:
    """Another daemon holds the lock: leave it if it is of our version, else replace it."""
    deadline = time.monotonic() + REPLACE_SECONDS
    asked = False
    while time.monotonic() < deadline:
        reply = client.control(git_dir, "status", 1.0)
        if reply is not None and reply[0] == "S":
            if json.loads(reply[1]).get("fingerprint") == fp:
                return False
            if not asked:
                asked = client.control(git_dir, "stop", 1.0) is not None
        if _lock(lockfd):
            return True
        time.sleep(0.05)
    return False


def claim(git_dir: str, fp: str) -> tuple[int, int] | None:
    """(fd of the agent directory, fd holding the lock) if this daemon is to serve."""
    agent = daemon_find.agent_dir(git_dir)
    os.makedirs(agent, mode=0o700, exist_ok=True)
    dirfd = os.open(agent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        lockfd = os.open(daemon_find.LOCK_NAME, flags, 0o600, dir_fd=dirfd)
    except OSError:
        os.close(dirfd)
        raise
    if (_lock(lockfd) or _replace(git_dir, fp, lockfd)) and _can_bind(git_dir, dirfd):
        return dirfd, lockfd
    os.close(lockfd)
    os.close(dirfd)
    return None


def _can_bind(git_dir: str, dirfd: int) -> bool:
    """Whether a socket can live here (not on every file system): tried before the imports."""
    name = f"daemon.probe.{os.getpid()}"
    addr = os.path.join(daemon_find.agent_dir(git_dir), name)
    if len(os.fsencode(addr)) >= daemon_find.SUN_PATH_MAX:
        addr = f"/proc/self/fd/{dirfd}/{name}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(addr)
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dirfd)
    return True
