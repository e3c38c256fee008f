"""The daemon's work-tree watcher: which paths changed since a snapshot (inotify).

The daemon (`daemon/server.py`) owns one `TreeWatcher` for its worktree. It watches
every directory of the work tree with inotify (through `inotify_simple`, a thin
ctypes wrapper, rather than ctypes code of ours) except `.git` and the inside of
nested repositories, and keeps, per path, the sequence number of the last change it
saw. It also watches one directory of its own, `<git dir>/agent/cookies/`: the
barrier of `daemon/barrier.py`. A daemon child that needs the watcher's view (a
snapshot, `git/incremental.py`) creates a cookie file there, then asks the daemon;
the daemon answers (`answer`) only once it has read the cookie's own event from
the kernel's queue, so every change made before the question (by the user, or by
the child itself: a restore) is in the answer. inotify queues an event before the
system call that caused it returns, and keeps events in order. Whatever the
watcher cannot vouch for is answered with no view, and the snapshot scans the
whole tree:

- the daemon just started and has not finished its first walk (`ready`);
- the kernel's queue overflowed (`IN_Q_OVERFLOW`): every snapshot older than
  the overflow scans in full;
- too many distinct paths changed (`MAX_PATHS`);
- the cookie's event was not seen;
- the watch limit (`fs.inotify.max_user_watches`) was reached, the root moved
  or went, or the tree is on a network or FUSE file system (no inotify events
  for other machines' writes): the watcher turns itself off.

Each of these is logged to `.git/agent/watch.log` with its reason, and
`git ckpt daemon status` shows the watcher's state. What a snapshot does with the
answer, and the stamp it leaves, are `git/watch_view.py` and `git/incremental.py`.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from git_agentckpt.git.watch_view import WatchView, log_line, read_stamp_seq

MAX_PATHS = 20_000  # distinct changed paths kept; more: the next snapshot scans in full
COOKIES = "cookies"  # in the agent directory: the barrier's files (daemon/barrier.py)
# changed paths a view may carry (its reply must fit a socket's buffer, ~200 KB, sent
# without blocking the daemon); more: no view, and the snapshot scans in full, as it
# would anyway beyond `incremental.MAX_PATHSPECS`
MAX_VIEW_PATHS = 2_000
MAX_COOKIES = 4096  # cookies seen and not yet asked about (a child killed in between)
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
    cookies: set[str] = field(default_factory=set)  # cookie files whose event was read
    _inotify: Any = None
    _cookie_wd: int = -1
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
            self.watch_cookies()
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

    def watch_cookies(self) -> str:
        """Watch the barrier's directory (emptied first: cookies of an earlier daemon)."""
        path = os.path.join(self.agent_dir, COOKIES)
        os.makedirs(path, mode=0o700, exist_ok=True)
        for name in os.listdir(path):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, name))
        if self._inotify is not None:
            self._cookie_wd = int(self._inotify.add_watch(path, IN_CREATE | IN_ONLYDIR))
        return path

    def answer(self, cookie: str) -> WatchView | None:
        """The view for a child that created `cookie` before asking: None unless the
        cookie's event was read (every change made before it was read too) and the
        watcher can vouch for its view. Changes the last snapshot covered are dropped."""
        self.drain()
        seen = cookie in self.cookies
        self.cookies.discard(cookie)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.agent_dir, COOKIES, cookie))
        if not seen:
            if not self.disabled:
                self._log("full scan: the watcher did not see the barrier's cookie")
            return None
        self.prune(read_stamp_seq(self.agent_dir, self.watcher_id))
        if self.disabled or not self.ready:
            return None
        if len(self.changed) + len(self.nested) > MAX_VIEW_PATHS:
            self._log(f"full scan: more than {MAX_VIEW_PATHS} paths changed since the stamp")
            return None
        return WatchView(
            self.watcher_id, self.seq, self.full_before, dict(self.changed), frozenset(self.nested)
        )

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
        if self._inotify is None:
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
        if wd == self._cookie_wd and wd >= 0:
            if mask & IN_CREATE and len(self.cookies) < MAX_COOKIES:
                self.cookies.add(name)
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
