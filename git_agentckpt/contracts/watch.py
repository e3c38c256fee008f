"""Files that snapshots never hold, under `forbidden_paths` / `protected_paths` globs.

`check` finds written paths by comparing snapshot trees, so files a snapshot
leaves out are invisible to it: gitignored ones (raw data often is), secret
paths, files above the size cap. "Raw data is read-only" must hold for
those too. So, per task, the files under the literal directory part of each
such glob (`data/raw/**` → `data/raw/`) are recorded when the task starts
(or at its first check, for a task started before this existed) in
`.git/agent/watch/<task>.json`: size, mtime, ctime, inode, type and the
sha256 of the content. Each check walks the same directories and reports
every path that appeared, went, or whose *content* changed, and that the
snapshot does not hold (those it sees itself).

"Changed" is decided by content, git's way: a file whose size, mtime,
ctime, inode and type are all the recorded ones is unchanged without being
read; when any of them moved, the file is hashed and compared with the
recorded sha256. So `touch` alone is no change (the entry's stamps are
refreshed), and a rewrite whose size and mtime were put back (`os.utime`)
is still caught, because the ctime cannot be put back. A file modified
within `RACY_NS` of the moment it was recorded may share its stamps with
the recorded version (a coarse file-system clock): such an entry is marked
racy and always hashed, like git's racily clean index entries. The
current content of a changed file is kept under `seen`, so a later check
does not hash it again while its stamps stay put.

A glob that starts with a wildcard (`**/*.csv`) names no directory to walk
and is left to the snapshot comparison: walking the whole tree at every check
would cost more than the check. A path that a glob added to the contract
since the record covers is recorded when first seen, not reported (the
record is its baseline); a path no glob covers any more is forgotten.

`rebaseline` replaces the record by what the directories hold now (a
person's decision: see `contracts/rebaseline.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from git_agentckpt.git.files import write_if_changed
from git_agentckpt.globs import has_wildcard, match_any, normalize_path

WATCHED_KINDS = ("forbidden_paths", "protected_paths")
RACY_NS = 2_000_000_000  # a file modified this close to its record may share its stamps
Stamp = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, mode


@dataclass(frozen=True)
class Entry:
    """What the record knows of one file. `sha256` None: recorded by an older version
    (size and mtime only) or unreadable then; its stamps alone decide."""

    stamp: Stamp
    sha256: str | None
    racy: bool = False
    legacy: bool = False  # (size, mtime) only: compare those two

    def same_stamp(self, now: Stamp) -> bool:
        if self.legacy:
            return self.stamp[:2] == now[:2]
        return self.stamp == now

    def to_json(self) -> list[object]:
        return [*self.stamp, self.sha256, self.racy]


@dataclass(frozen=True)
class WatchDiff:
    """Watched paths that appeared, went or changed content since the record."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    @property
    def paths(self) -> set[str]:
        return {*self.added, *self.removed, *self.changed}

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_json(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
        }


@dataclass
class Manifest:
    globs: tuple[str, ...]
    files: dict[str, Entry] = field(default_factory=dict)
    seen: dict[str, Entry] = field(default_factory=dict)  # current content of changed files


def base_dir(pattern: str) -> str | None:
    """The literal directory part of an anchored glob (`data/raw/**` → `data/raw`,
    `data/raw` → itself); None for a glob that matches at any depth (`*.log`) or
    starts with a wildcard (`**/x`), and for a negation."""
    pat = pattern.strip()
    if not pat or pat.startswith("!") or "/" not in pat.rstrip("/"):
        return None  # (globs.py: a pattern without an inner or leading `/` is unanchored)
    literal: list[str] = []
    for part in pat.strip("/").split("/"):
        if has_wildcard(part):
            break
        literal.append(part)
    return "/".join(literal) or None


def watched_globs(checks: Iterable[tuple[str, Sequence[str]]]) -> list[str]:
    """The globs of the watched check kinds, from (kind, paths) pairs."""
    out: list[str] = []
    for kind, paths in checks:
        if kind in WATCHED_KINDS:
            out.extend(p for p in paths if isinstance(p, str))
    return out


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def scan(workdir: str, globs: Sequence[str]) -> dict[str, Stamp]:
    """Every file under the globs' directories that matches a glob, with its stamps."""
    out: dict[str, Stamp] = {}
    bases = sorted({b for b in (base_dir(g) for g in globs) if b})
    for base in bases:
        if any(base.startswith(other + "/") for other in bases if other != base):
            continue  # walked with its parent
        _walk(workdir, base, globs, out)
    return out


def _walk(workdir: str, base: str, globs: Sequence[str], out: dict[str, Stamp]) -> None:
    top = os.path.join(workdir, base)
    try:
        st = os.lstat(top)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        if match_any(globs, base):
            out[base] = _stamp(st)
        return
    stack = [base]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(workdir, rel_dir)))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}"
            if entry.name == ".git":
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                    continue
                if match_any(globs, normalize_path(rel)):
                    out[rel] = _stamp(entry.stat(follow_symlinks=False))
            except OSError:
                continue


def content_sha256(workdir: str, rel: str) -> str | None:
    """sha256 of a regular file's bytes (a symbolic link: of its target; another kind
    of file: of its type); None when it cannot be read. Never follows a link, never
    blocks on a fifo."""
    path = os.path.join(workdir, rel)
    digest = hashlib.sha256()
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            digest.update(b"symlink\0" + os.fsencode(os.readlink(path)))
            return digest.hexdigest()
        if not stat.S_ISREG(st.st_mode):
            digest.update(f"special {stat.S_IFMT(st.st_mode)}".encode())
            return digest.hexdigest()
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None  # replaced by something else in between: unknown
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(workdir: str, rel: str, stamp: Stamp, started_ns: int) -> Entry:
    racy = max(stamp[1], stamp[2]) >= started_ns - RACY_NS
    return Entry(stamp, content_sha256(workdir, rel), racy)


def manifest_path(agent_dir: str, task: str) -> str:
    return os.path.join(agent_dir, "watch", task.replace("/", "%") + ".json")


def _load_entry(value: object) -> Entry:
    if not isinstance(value, list):
        raise TypeError("an entry is a list")
    if len(value) == 2:  # version 1: [size, mtime_ns]
        return Entry((int(value[0]), int(value[1]), 0, 0, 0), None, legacy=True)
    nums = tuple(int(v) for v in value[:5])
    sha = value[5]
    return Entry(
        (nums[0], nums[1], nums[2], nums[3], nums[4]),
        sha if isinstance(sha, str) else None,
        bool(value[6]),
    )


def load(path: str) -> Manifest | None:
    """The record (None when there is none, or it cannot be read: one is made anew)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        return Manifest(
            tuple(str(g) for g in doc.get("globs") or ()),
            {str(p): _load_entry(v) for p, v in doc["files"].items()},
            {str(p): _load_entry(v) for p, v in (doc.get("seen") or {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def save(path: str, manifest: Manifest) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc = {
        "v": 2,
        "globs": list(manifest.globs),
        "files": {p: e.to_json() for p, e in sorted(manifest.files.items())},
        "seen": {p: e.to_json() for p, e in sorted(manifest.seen.items())},
    }
    write_if_changed(path, json.dumps(doc, separators=(",", ":")).encode())


def snapshot_now(workdir: str, globs: Sequence[str]) -> Manifest:
    """What the watched directories hold now, every file hashed."""
    started = time.time_ns()
    files = {p: _entry(workdir, p, s, started) for p, s in scan(workdir, globs).items()}
    return Manifest(tuple(globs), files)


def record(agent_dir: str, task: str, workdir: str, globs: Sequence[str]) -> None:
    """At task start: what the watched directories hold now."""
    save(manifest_path(agent_dir, task), snapshot_now(workdir, globs))


@dataclass
class Comparison:
    diff: WatchDiff
    kept: Manifest  # the record, its unchanged entries refreshed
    accepted: Manifest  # the record as it would be if a person accepted everything


def compare(before: Manifest, workdir: str, globs: Sequence[str]) -> Comparison:
    """Compare the record with the disk now (see the module doc)."""
    started = time.time_ns()
    now = scan(workdir, globs)
    kept = Manifest(tuple(globs))
    accepted = Manifest(tuple(globs))
    added: list[str] = []
    removed: list[str] = []
    changed: list[str] = []
    for p in sorted(before.files.keys() | now.keys()):
        if not match_any(globs, p):
            continue  # no glob covers it any more
        old, st = before.files.get(p), now.get(p)
        if st is None:
            if old is not None:
                kept.files[p] = old  # reported until a person accepts it
                removed.append(p)
            continue
        if old is not None and old.same_stamp(st) and not old.racy and not old.legacy:
            kept.files[p] = accepted.files[p] = old
            continue
        seen = before.seen.get(p)
        if seen is not None and seen.same_stamp(st) and not seen.racy:
            current = seen
        else:
            current = _entry(workdir, p, st, started)
        accepted.files[p] = current
        if old is None:
            if before.globs and not match_any(before.globs, p):
                kept.files[p] = current  # newly watched: this is its baseline
            else:
                kept.seen[p] = current
                added.append(p)
            continue
        same = old.sha256 is not None and current.sha256 == old.sha256
        if same or (old.legacy and old.same_stamp(st)):
            kept.files[p] = current  # only the stamps moved (or an old record): refresh
        else:
            kept.files[p] = old
            kept.seen[p] = current
            changed.append(p)
    return Comparison(WatchDiff(tuple(added), tuple(removed), tuple(changed)), kept, accepted)


def changes(agent_dir: str, task: str, workdir: str, globs: Sequence[str]) -> WatchDiff:
    """Watched paths that appeared, went or changed since the task's record (the
    record's stamps are refreshed). No record yet: one is made now (nothing to report)."""
    if not globs:
        return WatchDiff()
    path = manifest_path(agent_dir, task)
    before = load(path)
    if before is None:
        save(path, snapshot_now(workdir, globs))
        return WatchDiff()
    result = compare(before, workdir, globs)
    save(path, result.kept)
    return result.diff


def changed_since_start(
    agent_dir: str,
    task: str,
    workdir: str,
    globs: Sequence[str],
    in_snapshot: Callable[[str], bool],
) -> set[str]:
    """`changes`, without the paths the snapshot holds (its comparison sees those)."""
    return {p for p in changes(agent_dir, task, workdir, globs).paths if not in_snapshot(p)}


def rebaseline(
    agent_dir: str,
    task: str,
    workdir: str,
    globs: Sequence[str],
    accept: Callable[[WatchDiff], bool] = lambda diff: True,
) -> WatchDiff | None:
    """Make what the watched directories hold now the task's record; the changes
    accepted. `accept` sees the changes first: when it says no (they are no longer
    what a person saw), nothing is written and None is returned."""
    path = manifest_path(agent_dir, task)
    before = load(path)
    if before is None:
        after, diff = snapshot_now(workdir, globs), WatchDiff()
    else:
        result = compare(before, workdir, globs)
        after, diff = result.accepted, result.diff
    if not accept(diff):
        return None
    save(path, after)
    return diff
