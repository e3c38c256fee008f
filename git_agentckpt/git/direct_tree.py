"""A snapshot in the daemon with no git reading the index: the last tree, changed files put in.

At 250k files the private index is 22 MB, and every git process that touches
it reads all of it (~35-40 ms here, git 2.39): `update-index` on the changed
paths and `write-tree` after it cost two such reads for a checkpoint of 15
changed files. In a daemon child the watcher names the changed paths
(`incremental.py`), and the stamp names the tree they changed from, so the new
tree needs neither: each changed file is hashed as `git add` would hash it
(`git hash-object -w --stdin-paths` when an attribute or `core.autocrlf` may
convert it, `convert.checkin_converts`; else written here as is), and only the
trees on the way to the changed paths are written again.

The private index is then *behind* the stamp's tree at those paths. The stamp
lists them (`watch_view.Stamp.behind`), and the next snapshot that needs git (below,
or a full scan, in the daemon or not) first writes the stamp's entries for them
into the index (`catch_up`: one `update-index --index-info`, no file read), so
git's path starts from an index that holds the last tree. Nothing else trusts the index
for content: verification outside the daemon settles every path where the index
and the expected tree disagree by hashing the file (`compare.py`), and the
"nothing changed" proof (`unchanged.py`) is forgotten here.

Anything that is not a plain edit takes git's own path (`incremental.update_paths`),
which keeps git's semantics: a nested repository, a file that is neither a regular
file nor a link, a path that matches `secret_paths` (pinned entries, re-included
secrets), a new file above `[snapshot] max_file_size`, skip-worktree entries, a
tracked file that was dropped and came back, `core.fileMode`, `core.symlinks` or
`core.ignoreCase` not at their Linux defaults, and more than `MAX_BEHIND` paths
behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from git_agentckpt.errors import CkptError
from git_agentckpt.git import incremental, private_index, unchanged, watch_view
from git_agentckpt.git.convert import checkin_converts, hash_object_paths
from git_agentckpt.git.repo import GitRepo, as_bool
from git_agentckpt.git.run import run_git
from git_agentckpt.git.secret_files import may_be_secret
from git_agentckpt.globs import match_excluded

MAX_BEHIND = 2_000
_TREE = 0o040000
_GITLINK = 0o160000
_LINK = 0o120000

# a change: (blob id, mode), or None for a path that goes
Entry = tuple[str, int] | None


@dataclass(frozen=True)
class DirectTree:
    """The tree written, and the paths it added or updated and removed."""

    tree: str
    added: list[str]
    removed: list[str]


class _GitsTurn(Exception):
    """A case this module leaves to git (module doc)."""


def snapshot_tree(
    repo: GitRepo,
    agent_dir: str,
    config: Sequence[str],
    chosen: incremental.Plan,
    secret_paths: Sequence[str],
) -> DirectTree | None:
    """The working tree as a tree, from the stamp's tree and the changed paths; None
    when git must do it (module doc)."""
    stamp = chosen.stamp
    if chosen.paths is None or stamp is None or len(stamp.behind) > MAX_BEHIND:
        return None
    if not chosen.paths:
        return DirectTree(stamp.tree, [], [])
    try:
        _settings_allow(repo, agent_dir)
        take, drop, new, became_dirs = incremental.classify(repo, stamp.tree, chosen.paths)
        if secret_paths and _any_secret(secret_paths, (*take, *drop, *new)):
            raise _GitsTurn
        new = incremental.not_ignored(repo, config, new)
        changes = _hashed(repo, [*take, *new], stamp.tree)
        for path in (*drop, *became_dirs):  # a file that became a directory goes too
            changes.setdefault(path, None)
        for path, entry in changes.items():
            if entry is None and _old_mode(repo, stamp.tree, path) == _GITLINK:
                raise _GitsTurn
        tree = apply_changes(repo, stamp.tree, changes)
    except (_GitsTurn, OSError, ValueError, UnicodeError):
        return None
    added = sorted(p for p, e in changes.items() if e is not None)
    return DirectTree(tree, added, sorted(p for p, e in changes.items() if e is None))


def _any_secret(secret_paths: Sequence[str], paths: Sequence[str]) -> bool:
    quick = may_be_secret(tuple(secret_paths))  # a first test, ~1 µs a path
    return any(quick(p) and match_excluded(secret_paths, p) for p in paths)


def _settings_allow(repo: GitRepo, agent_dir: str) -> None:
    filemode, symlinks, ignorecase = repo.config_values(
        ["core.filemode", "core.symlinks", "core.ignorecase"]
    )
    if not as_bool(filemode, True) or not as_bool(symlinks, True) or as_bool(ignorecase, False):
        raise _GitsTurn
    seed = private_index.load_seed(agent_dir)
    if seed is None or seed.skip or private_index.dropped_waiting(repo, agent_dir):
        raise _GitsTurn


def _old_mode(repo: GitRepo, tree: str, path: str) -> int | None:
    try:
        entry = repo.tree_entry(tree, path)
    except Exception as exc:  # an odd name libgit2 cannot look up
        raise _GitsTurn from exc
    return None if entry is None else entry[1]


def _hashed(repo: GitRepo, paths: Sequence[str], tree: str) -> dict[str, Entry]:
    """Each path's blob and mode as `git add` gives them, the blobs written."""
    out: dict[str, Entry] = {}
    regular: dict[str, int] = {}
    cap = repo.max_file_size
    for rel in paths:
        if _old_mode(repo, tree, rel) == _GITLINK:
            raise _GitsTurn
        full = os.path.join(repo.workdir, rel)
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            out[rel] = (repo.write_blob(os.fsencode(os.readlink(full))), _LINK)
        elif stat.S_ISREG(st.st_mode):
            if cap and st.st_size > cap:
                raise _GitsTurn  # `large.py` decides, after git's add
            # git keeps the owner's execute bit only (`create_ce_mode`)
            regular[rel] = 0o100755 if st.st_mode & stat.S_IXUSR else 0o100644
        else:
            raise _GitsTurn  # a nested repository, a fifo, a socket
    names = list(regular)
    if names and checkin_converts(repo, names):
        try:
            ids = hash_object_paths(repo, names, write=True)
        except CkptError as exc:  # a filter that failed: git's own path says why
            raise _GitsTurn from exc
    else:
        ids = [repo.write_blob_from_file(os.path.join(repo.workdir, p)) for p in names]
    for rel, oid in zip(names, ids, strict=True):
        out[rel] = (oid, regular[rel])
    return out


def apply_changes(repo: GitRepo, tree: str | None, changes: Mapping[str, Entry]) -> str:
    """`tree` with each path set to its entry (None: removed); only the trees on the way
    to a changed path are written. Directories left empty go, as git's `write-tree`
    never writes an empty one; a file where a directory was (or the reverse) replaces it."""
    written = _apply(repo, tree, changes)
    return written if written is not None else repo.empty_tree()


def _apply(repo: GitRepo, tree: str | None, changes: Mapping[str, Entry]) -> str | None:
    """`_apply` of one directory: its changed names are looked up one by one (a wide
    directory is never read into a table of all its entries)."""
    here: dict[str, Entry] = {}
    below: dict[str, dict[str, Entry]] = {}
    for path, entry in changes.items():
        name, _, rest = path.partition("/")
        if rest:
            below.setdefault(name, {})[rest] = entry
        else:
            here[name] = entry

    def old_entry(name: str) -> tuple[str, int] | None:
        return repo.tree_entry(tree, name) if tree is not None else None

    updates: dict[str, tuple[str, int]] = {}
    new_names = 0  # names not in `tree` that the updates add
    for name, sub in below.items():
        if here.get(name) is not None:
            if any(e is not None for e in sub.values()):
                raise ValueError(f"{name} is both a file and a directory")
            continue  # a directory became a file: the file replaces it below
        old = old_entry(name)
        old_tree = old[0] if old is not None and old[1] == _TREE else None
        made = _apply(repo, old_tree, sub) if sub else old_tree
        if made is not None:
            updates[name] = (made, _TREE)
            new_names += old is None
            here.pop(name, None)  # a file became a directory
        elif old is not None and (old_tree is not None or name in here):
            updates[name] = ("", 0)
    for name, entry in here.items():
        if name in updates:
            continue
        old = old_entry(name)
        if entry is not None:
            updates[name] = entry
            new_names += old is None
        elif old is not None:
            updates[name] = ("", 0)
    size = repo.tree_size(tree) if tree is not None else 0
    if not updates:
        return tree if size else None
    removed = sum(1 for oid, _ in updates.values() if not oid)  # only names `tree` has
    if size - removed + new_names == 0:
        return None
    return repo.write_tree(updates, tree)


def catch_up(repo: GitRepo, agent_dir: str, env: Mapping[str, str], config: Sequence[str]) -> None:
    """Write the stamp's tree entries at the paths where the private index is behind it
    (module doc), under the index flock, before git uses the index for a snapshot. An
    index written since the stamp (re-seeded) is left alone; one that cannot be brought
    up to date is dropped, and the next snapshot rebuilds it from the user's index."""
    stamp = watch_view.read_stamp(agent_dir)
    if stamp is None or not stamp.behind:
        return
    if stamp.index != unchanged.index_file_stamp(agent_dir):
        return
    gone: list[bytes] = []
    put: list[bytes] = []
    try:
        for path in stamp.behind:
            raw = os.fsencode(path)
            entry = repo.tree_entry(stamp.tree, path)
            if entry is None or entry[1] == _TREE:
                gone.append(b"0 %s\t%s\0" % (b"0" * 40, raw))
            else:
                put.append(b"%o %s\t%s\0" % (entry[1], entry[0].encode(), raw))
        proc = run_git(
            [*config, "update-index", "--add", "--replace", "-z", "--index-info"],
            cwd=repo.workdir,
            env=env,
            input=b"".join(gone + put),
            check=False,
        )
        if proc.returncode == 0:
            return
    except Exception as exc:  # a cache: any doubt drops it
        watch_view.log_line(agent_dir, f"private index dropped: cannot catch it up ({exc})")
    else:
        watch_view.log_line(agent_dir, "private index dropped: git refused to catch it up")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(agent_dir, "index"))
