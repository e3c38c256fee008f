"""A shadow git directory whose HEAD is any tree: `git status` against a checkpoint.

Workspace verification asks how the working tree differs from a checkpoint's
tree. `git status` answers exactly that, in one process, for its HEAD: HEAD
against the index (skipping unchanged directories by the cache-tree), the
index against the working tree (through the stat cache) and the untracked
files. So verification runs `git status` with `--git-dir` pointing here:

    .git/agent/shadow/
        HEAD                      the sha of a commit of the expected tree
        objects/info/alternates   the repository's object store (read-only use)
        objects/xx/...            only those commits (never in the user's store)
        config                    [include] the repository's config; bare = false
        info/exclude              a copy of the repository's info/exclude
        refs/                     empty

with `--work-tree` the real working tree and GIT_INDEX_FILE the private
index. The user's HEAD, index, refs and object store are never written. The
commits are made by hand (deterministic: same tree, same commit), so a
verification costs no extra process. SHA-1 repositories only: the caller
falls back to `diff-index` + `status` for others.
"""

from __future__ import annotations

import hashlib
import os
import zlib

from git_agentckpt.git.files import write_if_changed
from git_agentckpt.git.repo import GitRepo

_IDENT = b"git-ckpt <git-ckpt@localhost> 0 +0000"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _commit_for(objects: str, tree: str) -> str:
    """Write (once) a parentless commit of `tree` into `objects`; its sha."""
    body = b"tree %s\nauthor %s\ncommitter %s\n\nworkspace verification\n" % (
        tree.encode(),
        _IDENT,
        _IDENT,
    )
    raw = b"commit %d\0" % len(body) + body
    sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
    path = os.path.join(objects, sha[:2], sha[2:])
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(zlib.compress(raw, 1))
        os.replace(tmp, path)
    return sha


def shadow_git_dir(repo: GitRepo, agent_dir: str, tree: str) -> str | None:
    """The shadow git dir with HEAD at a commit of `tree`; None when not usable here.

    Call under the private index's flock (the shadow's HEAD is shared).
    """
    fmt = (repo.config_get("extensions.objectFormat") or "sha1").lower()
    if fmt != "sha1" or len(tree) != 40:
        return None
    shadow = os.path.join(agent_dir, "shadow")
    objects = os.path.join(shadow, "objects")
    os.makedirs(os.path.join(objects, "info"), exist_ok=True)
    os.makedirs(os.path.join(shadow, "refs", "heads"), exist_ok=True)
    os.makedirs(os.path.join(shadow, "info"), exist_ok=True)
    common = repo.common_dir
    write_if_changed(
        os.path.join(objects, "info", "alternates"),
        os.path.join(common, "objects").encode() + b"\n",
    )
    includes = [os.path.join(common, "config")]
    worktree_config = os.path.join(repo.git_dir, "config.worktree")
    if os.path.exists(worktree_config):
        includes.append(worktree_config)
    config = "".join(f"[include]\n\tpath = {_quoted(p)}\n" for p in includes)
    config += "[core]\n\tbare = false\n"
    write_if_changed(os.path.join(shadow, "config"), config.encode())
    write_if_changed(
        os.path.join(shadow, "info", "exclude"), _read(os.path.join(common, "info", "exclude"))
    )
    sha = _commit_for(objects, tree)
    write_if_changed(os.path.join(shadow, "HEAD"), sha.encode() + b"\n")
    return shadow
