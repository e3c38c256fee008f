"""The work-tree watcher of the per-worktree daemon: which paths changed since a snapshot.

The daemon (`cli/server.py`) owns one `TreeWatcher` for its worktree. It watches
every directory of the work tree with inotify (through `inotify_simple`, a
thin ctypes wrapper, rather than ctypes code of ours) except `.git` and the
inside of nested repositories, and keeps, per path, the sequence number of the
last change it saw. Each daemon child is forked right after `before_fork()`
drained the kernel's queue, so the child's copy of the watcher knows every
change made before its caller connected: inotify queues an event before the
system call that caused it returns.

A snapshot made in such a child (`git/incremental.py`) asks `view()` for the
paths changed since the sequence number recorded with the last snapshot
(`.git/agent/watch.json`), and runs `git add -A` on those paths only. Whatever
the watcher cannot vouch for gives `None`, and the snapshot scans the whole
tree as before:

- the daemon just started and has not finished its first walk (`ready`), or no
  snapshot was made since it started (the stamp names another watcher);
- the kernel's queue overflowed (`IN_Q_OVERFLOW`): every snapshot older than
  the overflow scans in full;
- too many distinct paths changed (`MAX_PATHS`);
- the watch limit (`fs.inotify.max_user_watches`) was reached, the root moved
  or went, or the tree is on a network or FUSE file system (no inotify events
  for other machines' writes): the watcher turns itself off.

Each of these is logged to `.git/agent/watch.log` with its reason, and
`git ckpt daemon status` shows the watcher's state.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

MAX_PATHS = 20_000  # distinct changed paths kept; more: the next snapshot scans in full
MAX_SYNC = 5_000  # changed paths sent to the daemon's spare child; more: a child is forked
_LOG = "watch.log"
_LOG_MAX = 64 * 1024
_REMOTE_FS = (
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre",
    "davfs", "virtiofs",
)  # fmt: skip

# inotify(7) masks (the kernel's ABI, the same on every Linux)
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_EXCL_UNLINK = 0x4000000
IN_ISDIR = 0x40000000
WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)


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


@dataclass
class TreeWatcher:
    """inotify watches over one work tree and the changes seen (see the module doc)."""

    workdir: str
    agent_dir: str
    watcher_id: str = field(default_factory=lambda: os.urandom(8).hex())
    seq: int = 0
    full_before: int = 1
    changed: dict[str, int] = field(default_factory=dict)
    nested: set[str] = field(default_factory=set)
    disabled: str = ""
    ready: bool = False
    overflows: int = 0
    owner_pid: int = field(default_factory=os.getpid)
    _inotify: Any = None
    _paths: dict[int, str] = field(default_factory=dict)  # wd -> relative dir ("" = root)
    _wds: dict[str, int] = field(default_factory=dict)
    _pending: list[str] = field(default_factory=list)  # dirs still to walk

    # -- life cycle ---------------------------------------------------------------

    def start(self, mountinfo: str | None = None) -> None:
        """Open inotify and queue the first walk (`step()` does it in slices)."""
        remote = remote_filesystem(self.workdir, mountinfo)
        if remote:
            self._disable(f"the work tree is on {remote}: its changes may not be seen")
            return
        try:
            import inotify_simple  # type: ignore[import-untyped]

            self._inotify = inotify_simple.INotify(nonblocking=True)
        except (ImportError, OSError) as exc:
            self._disable(f"inotify is not available ({exc})")
            return
        self._pending.append("")

    def fileno(self) -> int:
        return int(self._inotify.fileno()) if self._inotify is not None else -1

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def step(self, max_dirs: int = 500) -> bool:
        """Walk up to `max_dirs` directories of the first walk; True while some are left."""
        done = 0
        while self._pending and done < max_dirs and not self.disabled:
            self._watch_dir(self._pending.pop())
            done += 1
        if not self._pending and not self.ready and not self.disabled:
            self.ready = True
            self.full_before = self.seq + 1  # a snapshot must scan once after the walk
            self.seq += 1
        return bool(self._pending) and not self.disabled

    def finish_walk(self) -> None:
        while self.step():
            pass

    # -- what the daemon calls ----------------------------------------------------

    def on_readable(self) -> None:
        self.drain()

    def before_fork(self) -> None:
        """Take in every queued event and forget what the last snapshot covered."""
        self.drain()
        self.prune(read_stamp_seq(self.agent_dir, self.watcher_id))

    def view(self) -> WatchView | None:
        """The changes seen so far; None when the watcher cannot vouch for anything.
        In the daemon itself this drains the queue first; a forked child never reads
        the shared inotify descriptor and sees the state of its fork."""
        if os.getpid() == self.owner_pid:
            self.drain()
        if self.disabled or not self.ready:
            return None
        return WatchView(
            self.watcher_id, self.seq, self.full_before, dict(self.changed), frozenset(self.nested)
        )

    def changes_after(self, mark: object) -> dict[str, Any] | None:
        """What a process forked when `seq` was `mark` (the daemon's spare child) must
        learn to see what this watcher sees now (`catch_up`); None when too much."""
        if not isinstance(mark, int) or mark > self.seq:
            return None
        changed = {p: at for p, at in self.changed.items() if at > mark} if mark < self.seq else {}
        if len(changed) > MAX_SYNC:
            return None
        return {
            "seq": self.seq,
            "full_before": self.full_before,
            "disabled": self.disabled,
            "ready": self.ready,
            "overflows": self.overflows,
            "nested": sorted(self.nested),
            "changed": changed,
        }

    def catch_up(self, update: object) -> None:
        """Take in `changes_after`'s answer (in the spare child)."""
        if not isinstance(update, dict):
            raise ValueError("not a watcher update")
        self.changed.update(update["changed"])
        self.seq, self.full_before = int(update["seq"]), int(update["full_before"])
        self.disabled, self.ready = str(update["disabled"]), bool(update["ready"])
        self.overflows, self.nested = int(update["overflows"]), set(update["nested"])

    def prune(self, covered: int | None) -> None:
        """Drop the changes a snapshot recorded as covered (its stamp's seq)."""
        if covered is None or covered < self.full_before:
            return
        self.changed = {path: at for path, at in self.changed.items() if at > covered}

    def status(self) -> dict[str, object]:
        state = "off" if self.disabled else ("watching" if self.ready else "walking")
        return {
            "state": state,
            "reason": self.disabled,
            "directories": len(self._paths),
            "changed_paths": len(self.changed),
            "overflows": self.overflows,
        }

    # -- events -------------------------------------------------------------------

    def drain(self) -> None:
        if self._inotify is None or os.getpid() != self.owner_pid:
            return
        while True:
            try:
                events = list(self._inotify.read(timeout=0))
            except BlockingIOError:
                events = []
            if not events:
                return
            for event in events:
                self._handle(event.wd, event.mask, event.name)
                if self.disabled:
                    return

    def _handle(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.overflows += 1
            self.seq += 1
            self.full_before = self.seq + 1
            self.changed.clear()
            self._log("full scan: the inotify queue overflowed")
            return
        base = self._paths.get(wd)
        if base is None:
            return
        if mask & IN_IGNORED:
            self._forget(base)
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            if base == "":
                self._disable("the work tree's root was moved or removed")
            return  # the parent's own event names the path
        if base in self.nested and name != ".git":
            self._mark(base)  # inside a nested repository: git reads it as one gitlink
            return
        path = f"{base}/{name}" if base else name
        if name == ".git":
            if base == "":
                return  # the repository itself: never watched
            self._nested_changed(base, mask)
            return
        if mask & IN_ISDIR and mask & IN_ATTRIB:
            return  # a directory's own mode or times: nothing git records
        self._mark(path)
        if mask & IN_ISDIR:
            if mask & IN_MOVED_FROM or mask & IN_DELETE:
                self._unwatch_below(path)
            if mask & (IN_CREATE | IN_MOVED_TO):
                self._pending.append(path)
                while self._pending and not self.disabled:  # before the next snapshot
                    self._watch_dir(self._pending.pop())

    def _mark(self, path: str) -> None:
        self.seq += 1
        self.changed[path] = self.seq
        if len(self.changed) > MAX_PATHS:
            self.full_before = self.seq + 1
            self.changed.clear()
            self._log(f"full scan: more than {MAX_PATHS} paths changed")

    def _nested_changed(self, repo_dir: str, mask: int) -> None:
        if mask & (IN_CREATE | IN_MOVED_TO):
            self.nested.add(repo_dir)
            self._unwatch_below(repo_dir, keep_root=True)
        elif mask & (IN_DELETE | IN_MOVED_FROM):
            self.nested.discard(repo_dir)
            self._pending.append(repo_dir)
            while self._pending and not self.disabled:
                self._watch_dir(self._pending.pop())
        self._mark(repo_dir)

    # -- watches ------------------------------------------------------------------

    def _watch_dir(self, rel: str) -> None:
        full = os.path.join(self.workdir, rel) if rel else self.workdir
        try:
            wd = int(self._inotify.add_watch(full, WATCH_MASK))
        except OSError as exc:
            if exc.errno == 28:  # ENOSPC: fs.inotify.max_user_watches reached
                self._disable("the inotify watch limit (fs.inotify.max_user_watches) was reached")
            return  # gone again (ENOENT) or not a directory any more: its event follows
        old = self._paths.get(wd)
        if old is not None and old != rel:
            self._wds.pop(old, None)
        self._paths[wd] = rel
        self._wds[rel] = wd
        try:
            entries = list(os.scandir(full))
        except OSError:
            return
        if rel and any(e.name == ".git" for e in entries):
            self.nested.add(rel)  # a nested repository: its own tree is not ours to watch
            return
        for entry in entries:
            if entry.name == ".git" and not rel:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    self._pending.append(f"{rel}/{entry.name}" if rel else entry.name)
            except OSError:
                continue

    def _unwatch_below(self, rel: str, keep_root: bool = False) -> None:
        prefix = rel + "/"
        gone = [p for p in self._wds if p.startswith(prefix) or (p == rel and not keep_root)]
        for path in gone:
            wd = self._wds.pop(path)
            self._paths.pop(wd, None)
            with contextlib.suppress(OSError):
                self._inotify.rm_watch(wd)
        self.nested = {n for n in self.nested if not n.startswith(prefix)}

    def _forget(self, rel: str) -> None:
        wd = self._wds.pop(rel, None)
        if wd is not None:
            self._paths.pop(wd, None)

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        self.ready = False
        self.close()
        self._log("watcher off, every snapshot scans in full: " + reason)

    def _log(self, line: str) -> None:
        log_line(self.agent_dir, line)


# -- the stamp the last snapshot left ---------------------------------------------


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


def remote_filesystem(path: str, mountinfo: str | None = None) -> str:
    """The type of the file system holding `path` when inotify cannot see all its
    changes there (network, FUSE), else ''. `mountinfo`: /proc/self/mountinfo's text."""
    best, kind = "", ""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
                mountinfo = fh.read()
        except OSError:
            return ""
    lines = mountinfo.splitlines()
    real = os.path.realpath(path) if os.path.exists(path) else os.path.normpath(path)
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, right.split()[0]
    if kind.startswith("fuse") or kind in _REMOTE_FS:
        return kind
    return ""


# -- the watcher of this process (set in the daemon, inherited by its children) -----

_ACTIVE: TreeWatcher | None = None


def activate(watcher: TreeWatcher | None) -> None:
    global _ACTIVE
    _ACTIVE = watcher


def active_for(workdir: str) -> TreeWatcher | None:
    """The watcher of `workdir` when this process (or the daemon it was forked from)
    runs one."""
    watcher = _ACTIVE
    if watcher is None:
        return None
    if os.path.realpath(watcher.workdir) != os.path.realpath(workdir):
        return None
    return watcher


def start(workdir: str, agent_dir: str) -> TreeWatcher | None:
    """A started watcher for the daemon of `workdir`, or None when turned off
    (`GIT_CKPT_WATCH=off`) or not on Linux."""
    if os.environ.get("GIT_CKPT_WATCH", "").lower() in ("off", "0", "false", "no"):
        return None
    if not os.path.exists("/proc/self/mountinfo"):
        return None
    watcher = TreeWatcher(workdir, agent_dir)
    watcher.start()
    return watcher
