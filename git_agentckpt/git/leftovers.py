"""Files a killed writer leaves in a git directory, and who (if anyone) still uses them.

git, libgit2 and we take a lock by creating `<file>.lock` and renaming it into
place; a writer killed in between leaves the lock, and every later update of
that file fails ("Unable to create '….lock': File exists") until someone
removes it. Object writers leave `tmp_*` files in `objects/` the same way
(git's `tmp_obj_*`, `tmp_pack_*`, `tmp_idx_*`; libgit2's `tmp_object_git2_*`):
harmless, but they hold disk space. A checkpoint keeps the packs it writes
(`object_batch.py`: a `pack-*.keep` it holds open until its refs moved); a killed
one leaves the `.keep`, and its pack is never repacked or pruned.

This module finds those files and tells, from `/proc` (Linux), which live
processes have them open and which git processes run in the repository: git
closes a lock file after writing it and keeps it until the rename (for a ref
transaction, across the reference-transaction hook), so "nobody has it open"
alone does not prove that its owner is gone. Deciding is `store/doctor.py`'s.
Flock files (`agent/locks/*.flock`, `agent/index.flock`) are never listed:
the kernel releases those when their holder dies, and removing one would let
two processes hold "the" lock at once.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from git_agentckpt.git.object_batch import KEEP_NOTE

if TYPE_CHECKING:  # git/repo.py imports this module to break stale ref locks
    from git_agentckpt.git.repo import GitRepo

LOCK = "lock"
TEMPORARY = "temporary object file"
KEEP = "keep file of an unfinished checkpoint"
GONE = "it went away meanwhile (its writer finished)"
# The lock files of a git directory that git, libgit2 or git ckpt take (relative paths;
# a trailing "/" walks the directory for every `*.lock` below it).
_LOCKS_COMMON = ("refs/", "packed-refs.lock", "config.lock")
_LOCKS_PER_WORKTREE = ("agent/index.lock", "agent/shadow/")


@dataclass(frozen=True)
class LeftFile:
    path: str  # absolute
    kind: str  # LOCK | TEMPORARY
    age: float  # seconds since its last change
    size: int
    uid: int
    dev: int
    ino: int
    mtime_ns: int


@dataclass(frozen=True)
class Process:
    pid: int
    uid: int
    argv: tuple[str, ...]  # its command line (or its comm name)

    @property
    def command(self) -> str:
        return " ".join(self.argv)[:200]


@dataclass(frozen=True)
class ProcessScan:
    """What `/proc` says about the files and the repository."""

    available: bool  # False: no /proc (not Linux): nothing can be proven
    holders: dict[str, list[Process]]  # path -> live processes with it open
    git_here: list[Process]  # git processes whose working directory is in the repository
    hidden: list[Process]  # processes whose open files we may not read


def _git_dirs(repo: GitRepo) -> list[str]:
    dirs = [repo.common_dir]
    if repo.git_dir != repo.common_dir:
        dirs.append(repo.git_dir)
    try:
        with os.scandir(os.path.join(repo.common_dir, "worktrees")) as it:
            dirs.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        pass
    return sorted(set(dirs))


def _walk_files(top: str) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(top) as it:
            entries = list(it)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _walk_files(entry.path)
        elif entry.is_file(follow_symlinks=False):
            yield entry


def _candidates(repo: GitRepo) -> Iterator[tuple[str, str]]:
    """(path, kind) of every lock and temporary object file, without judging them."""
    wanted: list[str] = [os.path.join(repo.common_dir, rel) for rel in _LOCKS_COMMON]
    for git_dir in _git_dirs(repo):
        wanted += [os.path.join(git_dir, rel) for rel in _LOCKS_PER_WORKTREE]
    for path in wanted:
        if path.endswith("/"):
            for entry in _walk_files(path):
                if entry.name.endswith(".lock"):
                    yield entry.path, LOCK
        elif os.path.isfile(path):
            yield path, LOCK
    objects = os.path.join(repo.common_dir, "objects")
    try:
        with os.scandir(objects) as it:
            subdirs = [e.path for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        subdirs = []
    for directory in [objects, *subdirs]:
        if not os.path.basename(directory).startswith(("info", "incoming-")):
            yield from _temporary_in(directory)
    yield from _our_keeps(os.path.join(objects, "pack"))


def _temporary_in(directory: str) -> Iterator[tuple[str, str]]:
    """git prunes every `tmp_*` file of objects/, objects/xx/ and objects/pack/ the same way."""
    try:
        with os.scandir(directory) as it:
            for entry in it:
                if entry.name.startswith("tmp_") and entry.is_file(follow_symlinks=False):
                    yield entry.path, TEMPORARY
    except OSError:
        return


def _our_keeps(pack_dir: str) -> Iterator[tuple[str, str]]:
    """The `.keep` files a checkpoint writes (`object_batch.KEEP_NOTE`), not the user's."""
    mark = KEEP_NOTE.split("{", 1)[0].encode()
    try:
        with os.scandir(pack_dir) as it:
            keeps = [e.path for e in it if e.name.endswith(".keep") and e.is_file()]
    except OSError:
        return
    for path in keeps:
        try:
            with open(path, "rb") as fh:
                if fh.read(len(mark)) == mark:
                    yield path, KEEP
        except OSError:
            continue


def left_file(path: str, kind: str) -> LeftFile | None:
    """What one lock or temporary file is now (None: it went away)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None  # its writer finished meanwhile
    return LeftFile(
        path=path,
        kind=kind,
        age=max(0.0, time.time() - st.st_mtime),
        size=st.st_size,
        uid=st.st_uid,
        dev=st.st_dev,
        ino=st.st_ino,
        mtime_ns=st.st_mtime_ns,
    )


def find_left_files(repo: GitRepo) -> list[LeftFile]:
    """Every lock and temporary object file of the repository's git directories."""
    found = [f for path, kind in _candidates(repo) if (f := left_file(path, kind)) is not None]
    return sorted(found, key=lambda f: f.path)


def break_if_abandoned(repo: GitRepo, path: str, min_age: float) -> bool:
    """Remove the lock at `path` when its owner is provably gone (`why_kept` says None).

    A writer killed while it held a ref lock blocks that ref for ever; a live git
    may keep a lock closed but in use for as long as a hook runs, so age alone is
    no proof. Where /proc cannot tell (not Linux), age alone decides, as git's
    own users do by hand."""
    left = left_file(path, LOCK)
    if left is None or left.age <= min_age:
        return False
    scan = scan_processes(repo, [left])
    if scan.available and why_kept(left, scan, min_age) is not None:
        return False
    return remove_if_unchanged(left) is None


def _ancestors() -> set[int]:
    """This process and its parents (`git ckpt doctor` runs under git, in the repository)."""
    out = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.add(pid)
    return out


def _process(pid: int) -> Process | None:
    base = f"/proc/{pid}"
    try:
        uid = os.stat(base).st_uid
        with open(f"{base}/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
        if not argv:
            with open(f"{base}/comm", "rb") as fh:
                argv = [fh.read().decode("utf-8", "replace").strip()]
    except OSError:
        return None
    return Process(pid, uid, tuple(argv))


def _is_git(proc: Process) -> bool:
    """A git process that may hold a lock it has closed. Not `git ckpt …`: that git only
    waits for git-ckpt (whose own git children are seen on their own), and it is the
    caller of this very doctor when the warm server runs it. Not a daemon either
    (`fsmonitor--daemon` lives for ever and takes no lock)."""
    name = os.path.basename(proc.argv[0]) if proc.argv else ""
    if not (name == "git" or name.startswith("git-")):
        return False
    return proc.argv[1:2] != ("ckpt",) and not any(a.endswith("--daemon") for a in proc.argv)


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def scan_processes(repo: GitRepo, files: list[LeftFile]) -> ProcessScan:
    """Who has `files` open, which git processes run in the repository, whom we cannot see."""
    if not os.path.isdir("/proc/self/fd"):
        return ProcessScan(False, {}, [], [])
    names = {os.path.basename(f.path) for f in files}
    by_inode = {(f.dev, f.ino): f.path for f in files}
    roots = [os.path.realpath(d) for d in (repo.workdir, *_git_dirs(repo))]
    holders: dict[str, list[Process]] = {}
    git_here: list[Process] = []
    hidden: list[Process] = []
    skip = _ancestors()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        proc = _process(int(name))
        if proc is None:
            continue  # it exited meanwhile
        try:
            if _is_git(proc) and _inside(os.readlink(f"/proc/{name}/cwd"), roots):
                git_here.append(proc)
        except OSError:
            pass
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except PermissionError:
            hidden.append(proc)
            continue
        except OSError:
            continue
        for fd in fds:
            link = f"/proc/{name}/fd/{fd}"
            try:
                target = os.readlink(link)
                if os.path.basename(target.removesuffix(" (deleted)")) not in names:
                    continue  # stat only what could be one of ours: never a pipe or a socket
                st = os.stat(link)
            except OSError:
                continue
            path = by_inode.get((st.st_dev, st.st_ino))
            if path is not None:
                holders.setdefault(path, []).append(proc)
    return ProcessScan(True, holders, git_here, hidden)


def remove_if_unchanged(left: LeftFile) -> str | None:
    """Unlink `left` if it is still the very file that was judged (same inode and mtime).

    None when it was removed, else why not."""
    try:
        st = os.lstat(left.path)
        if (st.st_dev, st.st_ino, st.st_mtime_ns) != (left.dev, left.ino, left.mtime_ns):
            return "it changed while doctor looked at it: a writer is using it"
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        os.unlink(left.path)
    except FileNotFoundError:
        return GONE
    except OSError as exc:
        return f"cannot remove it: {exc.strerror}"
    return None


def age_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def why_kept(left: LeftFile, scan: ProcessScan, min_age: float) -> str | None:
    """Why `left` may still have a live owner (None: its owner is provably gone)."""
    if not scan.available:
        return "cannot tell who uses it: /proc is not available on this system"
    holders = scan.holders.get(left.path)
    if holders:
        return f"open in process {holders[0].pid} ({holders[0].command})"
    if left.age < min_age:
        return (
            f"changed {age_text(left.age)} ago: its writer may still be working; "
            f"run doctor again in {age_text(min_age - left.age)}"
        )
    if scan.git_here:
        proc = scan.git_here[0]
        return (
            f"git runs in this repository (process {proc.pid}: {proc.command}); "
            "run doctor again when it has finished"
        )
    hidden = [p for p in scan.hidden if p.uid == left.uid]
    if hidden:
        return (
            f"its owner (uid {left.uid}) has processes whose files cannot be inspected "
            f"(e.g. {hidden[0].pid}): run doctor as root or as that user"
        )
    return None
