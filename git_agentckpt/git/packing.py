"""Checkpoint objects packed as they are written, so a long task leaves no pile of
loose objects (`git count-objects`) or of packs, without waiting for a `git gc`.

A checkpoint writes its changed blobs, the trees on their paths, a commit, notes
and event commits: about 50 objects. Most arrive as one pack per checkpoint
(`object_batch.py`); a few small groups (event commits, a light checkpoint's
notes) are written loose, each file rounded up to a disk block and kept whole
(no deltas). After each checkpoint `pack_loose` puts the loose
objects of the repository in one pack, as git's own `maintenance` task
`loose-objects` does, once `PACK_AT` of them are loose (about every third
checkpoint of 10 changed files): `git pack-objects --window=0` of their ids
(compressed, no delta search: that costs ~0.1 s for 150 objects here and is
left to the roll-ups and `git gc`), then the loose copies of exactly those
objects are removed (a loose object written meanwhile stays). Packs are rolled
up geometrically (`git repack -d -l --geometric=2`, with deltas) once there are
more than `MAX_PACKS`, so their number stays logarithmic and the work is
proportional to the small packs (the repository's big pack is rewritten only
when the small ones add up to half of it).

It runs after the checkpoint committed and outside the task's lock, under a
lock of its own that it never waits for (a concurrent packer does the work). A
failure never fails the checkpoint: the objects stay loose, as without it.
`git config ckpt.packObjects false` turns it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import string
from dataclasses import dataclass

from git_agentckpt.git import object_batch
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import run_git

PACK_AT = 128  # loose objects: about 3 checkpoints of 10 changed files and their events
MAX_PACKS = 40  # above this many packs, roll small ones up (below git's gc.autoPackLimit,
# 50, at which any git command's `gc --auto` would repack the whole repository)
_HEX = frozenset(string.hexdigits.lower())


@dataclass(frozen=True)
class Packed:
    objects: int  # loose objects put in the new pack (0: none, or another packer ran)
    rolled_up: bool  # packs rolled up geometrically


def enabled(repo: GitRepo) -> bool:
    return repo.config_bool(object_batch.PACK_OBJECTS, True)


def objects_dir(repo: GitRepo) -> str:
    return os.path.join(repo.common_dir, "objects")


def roughly_loose(repo: GitRepo) -> int:
    """The loose objects, estimated from one fan-out directory in eight (`00`-`1f`),
    as `git gc --auto` estimates from one: 32 listings instead of 256 (~0.3 ms)."""
    root = objects_dir(repo)
    seen = 0
    for i in range(32):
        try:
            seen += sum(1 for n in os.listdir(os.path.join(root, f"{i:02x}")) if len(n) in (38, 62))
        except OSError:
            continue
    return seen * 8


def loose_objects(repo: GitRepo) -> list[str]:
    """The ids of the loose objects (one directory listing per fan-out directory)."""
    root = objects_dir(repo)
    found: list[str] = []
    try:
        fanout = [d for d in os.listdir(root) if len(d) == 2 and set(d) <= _HEX]
    except OSError:
        return found
    for d in fanout:
        try:
            names = os.listdir(os.path.join(root, d))
        except OSError:
            continue
        found += [d + n for n in names if len(n) in (38, 62) and set(n) <= _HEX]
    return found


def pack_count(repo: GitRepo) -> int:
    try:
        return sum(
            1 for n in os.listdir(os.path.join(objects_dir(repo), "pack")) if n.endswith(".pack")
        )
    except OSError:
        return 0


def pack_loose(repo: GitRepo, min_objects: int = PACK_AT) -> Packed:
    """Pack the loose objects once there are `min_objects` of them, drop the loose copies,
    roll small packs up when there are too many (module doc)."""
    lock_dir = os.path.join(repo.common_dir, "agent", "locks")
    os.makedirs(lock_dir, exist_ok=True)
    fd = os.open(os.path.join(lock_dir, "pack.flock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return Packed(0, False)  # another process is packing them
        packed = _pack_loose_ids(repo, min_objects)
        # a checkpoint's own objects arrive as a pack (`object_batch.py`): roll them up
        rolled = pack_count(repo) > MAX_PACKS
        if rolled:
            run_git(["repack", "-d", "-l", "-q", "--geometric=2"], cwd=repo.workdir)
        return Packed(packed, rolled)
    finally:
        os.close(fd)


def _pack_loose_ids(repo: GitRepo, min_objects: int) -> int:
    """Put the loose objects in one pack once there are `min_objects`; how many."""
    # the exact listing (256 directories, ~3 ms) only when the estimate comes near:
    # at the threshold and past it, a sample of a few dozen ids seldom falls short
    if roughly_loose(repo) < min_objects * 3 // 4:
        return 0
    ids = loose_objects(repo)
    if not ids or len(ids) < min_objects:
        return 0
    root = objects_dir(repo)
    run_git(
        ["pack-objects", "--quiet", "--window=0", os.path.join(root, "pack", "pack")],
        cwd=repo.workdir,
        input="".join(i + "\n" for i in ids).encode(),
    )
    # the pack and its index are in place (pack-objects renames them in before it
    # exits): the loose copies of exactly these objects can go
    for oid in ids:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(root, oid[:2], oid[2:]))
    return len(ids)
