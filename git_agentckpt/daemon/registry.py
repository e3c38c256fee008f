"""This user's daemons: a small file for each, and a cap on how many run at once.

Every daemon, once its socket is bound, writes `<cache>/git-ckpt/daemons/<key>.json`
(`$XDG_CACHE_HOME`, else `~/.cache`; `<key>` is made from its git dir) naming its
pid, git dir, work tree and start time, and touches the file after each call, so the
file's modification time is its last use. When a new daemon joins and more than
GIT_CKPT_DAEMON_MAX (4) are running, the least recently used ones are asked to stop
(they finish their running calls first). The file goes when the daemon exits; one
left by a daemon that was killed is dropped by the next reader that finds its pid
gone. `git ckpt daemon list` and `daemon stop --all` read these files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass

from git_agentckpt.daemon import client

MAX_VAR = "GIT_CKPT_DAEMON_MAX"
DEFAULT_MAX = 4


@dataclass(frozen=True)
class Entry:
    pid: int
    git_dir: str
    worktree: str
    started: float
    last_used: float
    path: str


def directory() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "git-ckpt", "daemons")


def _path(git_dir: str) -> str:
    key = hashlib.sha256(os.fsencode(os.path.realpath(git_dir))).hexdigest()[:20]
    return os.path.join(directory(), key + ".json")


def cap() -> int:
    try:
        return max(1, int(os.environ.get(MAX_VAR, "") or DEFAULT_MAX))
    except ValueError:
        return DEFAULT_MAX


def join(git_dir: str, worktree: str) -> None:
    """Register this process as the daemon of `git_dir`, then keep the count under the cap."""
    doc = {"v": 1, "pid": os.getpid(), "git_dir": git_dir, "worktree": worktree}
    doc["started"] = time.time()
    path = _path(git_dir)
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    evict(keep=os.getpid())


def touch(git_dir: str) -> None:
    with contextlib.suppress(OSError):
        os.utime(_path(git_dir))


def leave(git_dir: str) -> None:
    """Remove this daemon's file (only its own: a successor may have written it)."""
    path = _path(git_dir)
    entry = _read(path)
    if entry is not None and entry.pid == os.getpid():
        with contextlib.suppress(OSError):
            os.unlink(path)


def _read(path: str) -> Entry | None:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        return Entry(
            int(doc["pid"]),
            str(doc["git_dir"]),
            str(doc["worktree"]),
            float(doc["started"]),
            os.stat(path).st_mtime,
            path,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def entries() -> list[Entry]:
    """The daemons that run, most recently used first (files of dead ones are removed)."""
    try:
        names = [n for n in os.listdir(directory()) if n.endswith(".json")]
    except OSError:
        return []
    found = []
    for name in names:
        path = os.path.join(directory(), name)
        entry = _read(path)
        if entry is None:
            continue
        if not client.alive(entry.pid):
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        found.append(entry)
    return sorted(found, key=lambda e: e.last_used, reverse=True)


def evict(keep: int) -> list[Entry]:
    """Ask the least recently used daemons beyond the cap to stop (never `keep`)."""
    running = entries()
    asked = []
    for entry in running[cap() :]:
        if entry.pid != keep and client.control(entry.git_dir, "stop", 1.0) is not None:
            asked.append(entry)
    return asked
