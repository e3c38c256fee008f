"""Proof that the working tree did not change since the last snapshot (`check` uses it).

After each snapshot (`add -A` + `write-tree` on the private index) the tree is
recorded in `.git/agent/last-snapshot.json` with the stat data of the private
index file and a digest of the excludes it was written with:

    {"v": 1, "tree": "<id>", "index": "<ino:size:mtime_ns:ctime_ns>", "exclude": "<sha1>"}

Later, under the index flock and once the private index is prepared as for a
snapshot, the recorded tree is the working tree when:

- the private index file and the excludes are still the ones `write-tree` used
  (no re-seeding from a changed user's index, no secret pinning, no rule or
  large-file change happened since: each of those rewrites one of them);
- one `git ls-files -m -d -o --exclude-standard` on that index names nothing: no
  tracked path modified (git's own stat check, content compared where the stat
  data is racy, mode and type changes included) or deleted, and no untracked file
  that `add -A` would take in (a new `.gitignore` is one; an edited one is a
  modified path);
- the tree object is still in the repository.

In a sparse checkout, or with skip-worktree entries, it claims nothing. Any doubt
means None: the caller takes the full snapshot, which is always right.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence

from git_agentckpt.git import private_index
from git_agentckpt.git.files import write_if_changed
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import run_git

_LAST = "last-snapshot.json"


def index_file_stamp(base: str) -> str | None:
    """The private index file as it is on disk (git replaces or rewrites it on a write)."""
    try:
        st = os.stat(os.path.join(base, "index"))
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def excludes_digest(base: str) -> str:
    try:
        with open(os.path.join(base, "exclude"), "rb") as fh:
            return hashlib.sha1(fh.read(), usedforsecurity=False).hexdigest()
    except OSError:
        return ""


def remember(base: str, tree: str) -> None:
    """Under the flock, right after `write-tree`: the tree and what it was written from."""
    stamp = index_file_stamp(base)
    if stamp is None:
        return
    doc = {"v": 1, "tree": tree, "index": stamp, "exclude": excludes_digest(base)}
    write_if_changed(os.path.join(base, _LAST), json.dumps(doc, sort_keys=True).encode())


def forget(base: str) -> None:
    """The private index no longer describes the last tree (`direct_tree.py`)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(base, _LAST))


def _last(base: str) -> tuple[str, str, str] | None:
    try:
        with open(os.path.join(base, _LAST), encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("v") != 1:
            return None
        return str(doc["tree"]), str(doc["index"]), str(doc["exclude"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # a cache: the next full snapshot writes it again


def last_tree_if_unchanged(
    repo: GitRepo, base: str, env: Mapping[str, str], config: Sequence[str]
) -> str | None:
    """The last snapshot's tree if the working tree provably did not change since (module
    doc), else None. Under the index flock, after the private index was prepared."""
    last = _last(base)
    if last is None:
        return None
    tree, index_stamp, excludes = last
    if (index_file_stamp(base), excludes_digest(base)) != (index_stamp, excludes):
        return None
    seed = private_index.load_seed(base)
    if seed is None or seed.skip or seed.sparse or private_index.is_sparse(repo):
        return None
    proc = run_git(
        [*config, "ls-files", "-z", "-m", "-d", "-o", "--exclude-standard"],
        cwd=repo.workdir,
        env=env,
        check=False,
    )
    if proc.returncode != 0 or proc.stdout or not repo.exists(tree):
        return None
    return tree
