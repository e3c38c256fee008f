"""The private index (`.git/agent/index`) kept in step with the user's index.

A snapshot is `git add -A` on a fresh copy of the user's *current* index. Copying
the index at every snapshot would throw away the stat data our own `add` wrote
back (files the user never staged would be hashed every time), so the copy is
kept and made again only when the user's index changed since it was made:

- the user's index is stamped by its size and checksum trailer (its last
  bytes: the hash of everything before them), read with one `pread`; an index
  written without a hash (`index.skipHash`) is stamped by inode, size, mtime and
  ctime instead. git replaces its index by a rename, so a reader never sees a
  half-written one, and `index.lock` (a write in progress) is not looked at: the
  index that is current is the one git has committed to.
- when the stamp differs, the index is copied and its entries listed; if they are
  the ones of the last seeding (path, mode, blob, stage, the two bits: only stat
  data changed, as when `git status` refreshed it), the copy is dropped and the
  private index kept, its stat data being the warmer.
- ignore rules that live outside the tree (`core.excludesFile`,
  `info/exclude`) are stamped too: a file the private index picked up while it
  was not ignored would otherwise stay in every later snapshot. A `.gitignore`
  inside the tree is seen by `add` itself (the caller re-seeds when one changed).
- the stamps are kept in `.git/agent/seed.json`:

    {"v": 1, "index": "<stamp>", "entries": "<sha1 of the listing>",
     "rules": "<sha1>", "sparse": bool,
     "skip": <skip-worktree entries of the user's index>, "cleared": [<path>, ...]}

Seeding copies the index with its mtime kept (racy-git edits are still seen:
git compares an entry's mtime with the index file's), always from one open file
descriptor, so the stamp describes exactly the bytes copied. Then:

- `assume-unchanged` bits are cleared: they promise git the file did not change,
  and a snapshot must see what is on disk;
- `skip-worktree` entries whose file exists are read from disk, those whose
  file is absent keep the index's blob (a sparse checkout's paths outside the
  cone, `git add -A --sparse` semantics). In a sparse checkout git itself reads
  present files that way; elsewhere `skip-worktree` paths are checked by `lstat`
  at each snapshot (`clear_present`), and a path whose file went away is given
  its index entry back (`keep_skipped`), so deleting such a file never turns
  into a deletion. The user's skip-worktree entries are listed in
  `.git/agent/seed-skip` (`mode oid\\tpath\\0` records) for that.

Re-seeding costs one copy of the index and a `ls-files` (about 8 ms at 10k
files), and the first snapshot after it hashes again the files whose stat data
the user's index does not have (those the user never staged, or changed since).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from git_agentckpt.git.files import write_if_changed
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import run_git
from git_agentckpt.globs import match_excluded

_SEED = "seed.json"
_SKIP = "seed-skip"
# Commands on the private index never split it: a split index would share its
# base with the user's (`sharedindex.*` in the git dir), which git may expire.
NO_SPLIT = ["-c", "core.splitIndex=false"]
# `ls-files -s -v -z` records with a bit set: lowercase (assume-unchanged) or `S`
_FLAGGED = re.compile(rb"(?:^|\0)([a-zS]) ([0-7]+) ([0-9a-f]+) [0-3]\t([^\0]*)")


@dataclass
class Seed:
    """What `.git/agent/seed.json` records about the copy the private index started from."""

    index: str = ""
    rules: str = ""
    sparse: bool = False
    skip: int = 0
    cleared: list[str] = field(default_factory=list)
    entries: str = ""  # sha1 of the seed's `ls-files -s -v` (stat data left out)

    def save(self, base: str) -> None:
        doc = {
            "v": 1,
            "index": self.index,
            "rules": self.rules,
            "sparse": self.sparse,
            "skip": self.skip,
            "cleared": sorted(self.cleared),
            "entries": self.entries,
        }
        write_if_changed(os.path.join(base, _SEED), json.dumps(doc, sort_keys=True).encode())


def load_seed(base: str) -> Seed | None:
    try:
        with open(os.path.join(base, _SEED), encoding="utf-8") as fh:
            doc = json.load(fh)
        cleared = doc["cleared"]
        if doc.get("v") != 1 or not isinstance(cleared, list):
            return None
        return Seed(
            str(doc["index"]),
            str(doc["rules"]),
            bool(doc["sparse"]),
            int(doc["skip"]),
            [str(p) for p in cleared],
            str(doc["entries"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a cache: re-seeding rebuilds it


def user_index(repo: GitRepo) -> str:
    return os.path.join(repo.git_dir, "index")


def _stamp(st: os.stat_result, tail: bytes) -> str:
    stamp = f"{st.st_size}:{tail.hex()}"
    if tail[-20:] == bytes(20):  # written without a checksum (index.skipHash)
        stamp += f":{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    return stamp


def index_stamp(path: str) -> str:
    """The stamp of the index file at `path` ("none" when there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return "none"
    try:
        st = os.fstat(fd)
        return _stamp(st, os.pread(fd, 32, max(0, st.st_size - 32)))
    finally:
        os.close(fd)


def rules_stamp(repo: GitRepo, global_excludes: str) -> str:
    """A digest of the ignore rules kept outside the working tree."""
    h = hashlib.sha1(global_excludes.encode("utf-8", "surrogateescape"), usedforsecurity=False)
    with suppress(OSError), open(os.path.join(repo.common_dir, "info", "exclude"), "rb") as fh:
        h.update(b"\0" + fh.read())
    return h.hexdigest()


def is_sparse(repo: GitRepo) -> bool:
    return repo.config_bool("core.sparseCheckout", False)


def sync(repo: GitRepo, base: str, index: str, rules: str, *, force: bool = False) -> bool:
    """Re-seed the private index if the user's index (or the ignore rules, or the
    sparse setting) changed since it was seeded, or it is missing. True if it did."""
    sparse = is_sparse(repo)
    seed = None if force else load_seed(base)
    if seed is None or not os.path.exists(index) or (seed.rules, seed.sparse) != (rules, sparse):
        seed = None
    elif seed.index == index_stamp(user_index(repo)):
        return False  # the common case: one `pread` and a small JSON file
    copy = f"{index}.{os.getpid()}.seed"
    try:
        stamp = _copy_index(repo, copy)
        listing = _listing(repo, copy) if stamp != "none" else b""
        entries = hashlib.sha1(listing, usedforsecurity=False).hexdigest()
        if seed is not None and seed.entries == entries:
            # only stat data changed (a `git status` refreshed it): the private index
            # holds the same entries, and its own stat data is warmer than the copy's
            seed.index = stamp
            seed.save(base)
            return False
        if stamp == "none":
            with suppress(FileNotFoundError):
                os.unlink(index)
        else:
            os.replace(copy, index)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(copy)
    _seed(repo, base, index, listing, Seed(stamp, rules, sparse, entries=entries))
    return True


def _copy_index(repo: GitRepo, dest: str) -> str:
    """Copy the user's index to `dest`, mtime kept, from one descriptor. Its stamp."""
    try:
        fd = os.open(user_index(repo), os.O_RDONLY)
    except FileNotFoundError:
        return "none"
    try:
        st = os.fstat(fd)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    with open(dest, "wb") as fh:
        fh.write(data)
    # keep the mtime: racy-git detection compares entries' mtimes with the index's
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
    return _stamp(st, data[-32:])


def _listing(repo: GitRepo, index: str) -> bytes:
    """Every entry of `index`: tag, mode, blob, stage, path. The bits as stored: in a
    sparse checkout git would report present files as not skipped (it reads them from
    disk), which would hide them from `keep_skipped`."""
    return run_git(
        [*NO_SPLIT, "-c", "core.sparseCheckout=false", "ls-files", "-s", "-v", "-z"],
        cwd=repo.workdir,
        env={"GIT_INDEX_FILE": index},
    ).stdout


def _seed(repo: GitRepo, base: str, index: str, listing: bytes, seed: Seed) -> None:
    """The copy is in place: clear its bits (module doc), then record the seed."""
    forget_dropped(base)
    env = {"GIT_INDEX_FILE": index}
    assumed: list[bytes] = []
    skipped: list[bytes] = []
    for m in _FLAGGED.finditer(listing):  # nearly every entry is `H`: skipped by the regex
        tag, mode, oid, path = m.groups()
        if tag.islower():
            assumed.append(path)
        if tag in (b"S", b"s"):
            skipped.append(b"%s %s\t%s" % (mode, oid, path))
    _set_bit(repo, env, "--no-assume-unchanged", assumed)
    if not seed.sparse:  # a sparse checkout: git reads the present ones itself
        present = [p for p in _skip_paths(skipped) if _exists(repo, p)]
        _set_bit(repo, env, "--no-skip-worktree", present)
        seed.cleared = [os.fsdecode(p) for p in present]
    write_if_changed(os.path.join(base, _SKIP), b"".join(r + b"\0" for r in skipped))
    seed.skip = len(skipped)
    seed.save(base)  # last: a seed cut short is made again (no seed.json, or an old one)


def _skip_paths(records: Iterable[bytes]) -> list[bytes]:
    return [r.partition(b"\t")[2] for r in records]


def _exists(repo: GitRepo, path: bytes) -> bool:
    return os.path.lexists(os.path.join(os.fsencode(repo.workdir), path))


def _is_file(repo: GitRepo, path: bytes) -> bool:
    try:
        mode = os.lstat(os.path.join(os.fsencode(repo.workdir), path)).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _set_bit(repo: GitRepo, env: Mapping[str, str], flag: str, paths: Sequence[bytes]) -> None:
    if paths:
        run_git(
            [*NO_SPLIT, "update-index", flag, "-z", "--stdin"],
            cwd=repo.workdir,
            env=env,
            input=b"".join(p + b"\0" for p in paths),
        )


def _load_skipped(base: str) -> dict[bytes, bytes]:
    """path -> `mode oid` of the user's skip-worktree entries at the last seeding."""
    try:
        with open(os.path.join(base, _SKIP), "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    out: dict[bytes, bytes] = {}
    for rec in data.split(b"\0"):
        meta, _, path = rec.partition(b"\t")
        if path:
            out[path] = meta
    return out


def clear_present(
    repo: GitRepo, base: str, env: Mapping[str, str], secret_paths: Sequence[str]
) -> None:
    """Outside a sparse checkout: skip-worktree paths whose file appeared since the
    seeding are read from disk from now on (not secret ones: those stay pinned to
    HEAD's blob, `secret_files.py`). Costs an `lstat` per such path."""
    seed = load_seed(base)
    if seed is None or not seed.skip or seed.sparse:
        return
    cleared = set(seed.cleared)
    appeared = [
        p
        for p in _load_skipped(base)
        if os.fsdecode(p) not in cleared
        and _exists(repo, p)
        and not match_excluded(secret_paths, os.fsdecode(p))
    ]
    if appeared:
        _set_bit(repo, env, "--no-skip-worktree", appeared)
        seed.cleared = sorted(cleared | {os.fsdecode(p) for p in appeared})
        seed.save(base)


def keep_skipped(repo: GitRepo, base: str, env: Mapping[str, str], removed: Sequence[str]) -> None:
    """After `add`: a path `add` removed whose entry the user's index skips (and whose
    file is absent) gets the user's entry back, skip-worktree: it is not a deletion."""
    seed = load_seed(base)
    if seed is None or not seed.skip or not removed:
        return
    skipped = _load_skipped(base)
    back = {
        p: skipped[p]
        for p in (os.fsencode(r) for r in removed)
        if p in skipped and not _exists(repo, p)
    }
    if not back:
        return
    run_git(
        [*NO_SPLIT, "update-index", "-z", "--index-info"],
        cwd=repo.workdir,
        env=env,
        input=b"".join(meta + b"\t" + p + b"\0" for p, meta in back.items()),
    )
    _set_bit(repo, env, "--skip-worktree", list(back))
    if seed.cleared:
        seed.cleared = sorted(set(seed.cleared) - {os.fsdecode(p) for p in back})
        seed.save(base)


def outside_sparse_checkout(repo: GitRepo, path: str) -> bool:
    """True when the sparse checkout leaves `path` out (git would not check it out)."""
    if not is_sparse(repo):
        return False
    # `add --dry-run` still takes the index's lock: a scratch index of our own
    os.makedirs(os.path.join(repo.git_dir, "agent"), exist_ok=True)
    scratch = os.path.join(repo.git_dir, "agent", f"sparse-probe.{os.getpid()}.index")
    try:
        proc = run_git(
            ["add", "--dry-run", "--ignore-missing", "--", f":(literal){path}"],
            cwd=repo.workdir,
            env={"GIT_INDEX_FILE": scratch},
            check=False,
        )
    finally:
        with suppress(FileNotFoundError):
            os.unlink(scratch)
    return b"sparse-checkout" in proc.stderr


# -- files the user tracks that went away and came back -----------------------------
#
# `add -A` drops the entry of a deleted file. If the file comes back where an ignore
# rule now covers it, `add -A` on the private index would not take it again, while on
# a fresh copy of the user's index (which still tracks it) it would: such paths are
# remembered in `.git/agent/seed-dropped` and force-added when they exist again.
_DROPPED = "seed-dropped"


def _load_dropped(base: str) -> set[bytes]:
    try:
        with open(os.path.join(base, _DROPPED), "rb") as fh:
            return {p for p in fh.read().split(b"\0") if p}
    except OSError:
        return set()


def _save_dropped(base: str, paths: set[bytes]) -> None:
    path = os.path.join(base, _DROPPED)
    if not paths:
        with suppress(FileNotFoundError):
            os.unlink(path)
        return
    write_if_changed(path, b"".join(p + b"\0" for p in sorted(paths)))


def forget_dropped(base: str) -> None:
    """A re-seed: the fresh copy holds every entry the user's index has."""
    _save_dropped(base, set())


def remember_dropped(repo: GitRepo, base: str, removed: Sequence[str]) -> None:
    """Of the paths `add -A` just removed, remember those the user's index tracks."""
    if not removed:
        return
    proc = run_git(
        ["--literal-pathspecs", "ls-files", "-z", "--", *removed],
        cwd=repo.workdir,
        env={"GIT_INDEX_FILE": user_index(repo)},
        check=False,
    )
    tracked = {p for p in proc.stdout.split(b"\0") if p}
    if tracked:
        _save_dropped(base, _load_dropped(base) | tracked)


def dropped_waiting(repo: GitRepo, base: str) -> bool:
    """Whether a remembered dropped path exists again (`bring_back_dropped` would act)."""
    return any(_is_file(repo, p) for p in _load_dropped(base))


def bring_back_dropped(repo: GitRepo, base: str, env: Mapping[str, str]) -> bytes:
    """Force-add the remembered paths whose file exists again; `add --verbose` output."""
    dropped = _load_dropped(base)
    back = [p for p in dropped if _is_file(repo, p)]
    if not back:
        return b""
    proc = run_git(
        [
            "--literal-pathspecs",
            *NO_SPLIT,
            "add",
            "-f",
            "--verbose",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ],
        cwd=repo.workdir,
        env=env,
        input=b"".join(p + b"\0" for p in back),
        check=False,
    )
    if proc.returncode == 0:
        _save_dropped(base, dropped - set(back))
    return proc.stdout
