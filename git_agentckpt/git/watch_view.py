"""What a snapshot may take from the daemon's work-tree watcher, and the stamp it leaves.

A snapshot made in a daemon child (`git/incremental.py`) asks the watcher's view
(`active_for(workdir).view()`) for the paths changed since the sequence number
recorded with the last snapshot (the stamp, `.git/agent/watch.json`), and runs
`git add -A` on those paths only. The view comes from the daemon through a barrier
(`daemon/barrier.py`, a cookie file, as git's `fsmonitor--daemon` does): every
change made before the question, the child's own writes included, is in the
answer. Whatever the watcher cannot vouch for gives `None`, and the snapshot
scans the whole tree. This module is data only: the watcher itself (inotify) is
`daemon/watcher.py`, in the daemon process.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Protocol

_LOG = "watch.log"
_LOG_MAX = 64 * 1024


@dataclass(frozen=True)
class WatchView:
    """What a snapshot may rely on: the changes the watcher saw up to `seq`."""

    watcher_id: str
    seq: int
    full_before: int  # a stamp older than this scans in full (an overflow, a lost path)
    changed: dict[str, int]
    nested: frozenset[str]  # nested repositories: not watched inside, always re-read

    def changes_since(self, seq: int) -> list[str] | None:
        """The paths changed after `seq` (nested repositories always among them), or
        None when the watcher cannot vouch for that span."""
        if seq < self.full_before or seq > self.seq:
            return None
        paths = {path for path, at in self.changed.items() if at > seq}
        return sorted(paths | self.nested)


class ViewSource(Protocol):
    """Where a process gets the watcher's view of `workdir` (a daemon child: its barrier)."""

    workdir: str

    def view(self) -> WatchView | None: ...


@dataclass(frozen=True)
class Stamp:
    """`.git/agent/watch.json`: which watcher's changes the last snapshot took in
    (up to `seq`), the tree it wrote, the private index it left (`unchanged.
    index_file_stamp`: a write by anything else makes the stamp stale), the
    excludes it was written with, and the paths where that index is behind the
    tree (written without git, `direct_tree.py`)."""

    watcher_id: str
    seq: int
    tree: str
    index: str
    rules: str
    behind: tuple[str, ...] = ()


def stamp_path(agent_dir: str) -> str:
    return os.path.join(agent_dir, "watch.json")


def read_stamp(agent_dir: str) -> Stamp | None:
    try:
        with open(stamp_path(agent_dir), encoding="utf-8") as fh:
            doc = json.load(fh)
        return Stamp(
            str(doc["watcher"]),
            int(doc["seq"]),
            str(doc["tree"]),
            str(doc["index"]),
            str(doc["rules"]),
            tuple(str(p) for p in doc.get("behind", ())),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # a cache: a full scan makes it again


def read_stamp_seq(agent_dir: str, watcher_id: str) -> int | None:
    stamp = read_stamp(agent_dir)
    return stamp.seq if stamp is not None and stamp.watcher_id == watcher_id else None


def write_stamp(agent_dir: str, stamp: Stamp) -> None:
    doc = {
        "v": 1,
        "watcher": stamp.watcher_id,
        "seq": stamp.seq,
        "tree": stamp.tree,
        "index": stamp.index,
        "rules": stamp.rules,
        "behind": list(stamp.behind),
    }
    tmp = stamp_path(agent_dir) + f".{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    os.replace(tmp, stamp_path(agent_dir))


def log_line(agent_dir: str, line: str) -> None:
    """Append a dated line to `.git/agent/watch.log` (kept under 64 KiB)."""
    path = os.path.join(agent_dir, _LOG)
    try:
        if os.path.getsize(path) > _LOG_MAX:
            os.replace(path, path + ".old")
    except OSError:
        pass
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        with open(path, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(f"{stamp} pid {os.getpid()}: {line}\n")
    except OSError:
        pass


def read_log(agent_dir: str, last: int = 20) -> list[str]:
    try:
        with open(os.path.join(agent_dir, _LOG), encoding="utf-8", errors="replace") as fh:
            return fh.read().splitlines()[-last:]
    except OSError:
        return []


# -- the view source of this process (set in a daemon child) -------------------------

_ACTIVE: ViewSource | None = None


def activate(source: ViewSource | None) -> None:
    global _ACTIVE
    _ACTIVE = source


def active_for(workdir: str) -> ViewSource | None:
    """The view source of `workdir` when this process has one (a daemon child)."""
    source = _ACTIVE
    if source is None:
        return None
    if os.path.realpath(source.workdir) != os.path.realpath(workdir):
        return None
    return source
