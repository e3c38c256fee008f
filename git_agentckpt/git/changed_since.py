"""The paths that differ between a task's baseline tree and a later tree, kept from one
call to the next.

`check` (every agent's `Stop` hook) and resume count the files changed since the
task's baseline (`max_changed_files`, `protected_paths`, `forbidden_paths`). A diff of
the baseline against the working tree's snapshot reads every directory on a changed
path of both trees: at 100k files with 1,000 files changed since the baseline that is
~75 ms, whatever changed since the last call. So the last answer is kept in
`<git dir>/agent/changed.json` (a cache: per baseline, the tree it was computed for
and its paths), and the next answer for the same baseline is that one corrected by
the diff between its tree and the new one: a path's membership can only change where
those two trees differ, and there it is decided by comparing the baseline's entry
with the new one. The answer is exactly `diff_trees(baseline, tree)`'s paths.

A file that is missing, torn, edited (its digest) or of another format is ignored and
written again; at most `MAX_BASES` baselines are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os

from git_agentckpt.git.repo import GitRepo

FORMAT = "git-ckpt changed paths v1"
NAME = "changed.json"
MAX_BASES = 4
_TREE = 0o040000


def changed_between(repo: GitRepo, agent_dir: str, base_tree: str, tree: str) -> frozenset[str]:
    """The paths of the files (blobs, links, gitlinks) that differ between the two trees."""
    memos = _load(agent_dir)
    memo = memos.get(base_tree)
    if memo is not None and memo[0] == tree:
        return frozenset(memo[1])
    if memo is None:
        paths = {c.path for c in repo.diff_trees(base_tree, tree)}
    else:
        paths = set(memo[1])
        for path in {c.path for c in repo.diff_trees(memo[0], tree)}:
            if _file(repo, base_tree, path) != _file(repo, tree, path):
                paths.add(path)
            else:
                paths.discard(path)
    memos.pop(base_tree, None)
    memos[base_tree] = (tree, sorted(paths))
    _save(agent_dir, dict(list(memos.items())[-MAX_BASES:]))
    return frozenset(paths)


def _file(repo: GitRepo, tree: str, path: str) -> tuple[str, int] | None:
    entry = repo.tree_entry(tree, path)
    return None if entry is None or entry[1] == _TREE else entry


def _load(agent_dir: str) -> dict[str, tuple[str, list[str]]]:
    try:
        with open(os.path.join(agent_dir, NAME), "rb") as fh:
            head, _, payload = fh.read().partition(b"\n")
        if head != f"{FORMAT} {hashlib.sha256(payload).hexdigest()}".encode():
            return {}
        doc = json.loads(payload)
        return {str(b): (str(t), [str(p) for p in ps]) for b, (t, ps) in doc.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _save(agent_dir: str, memos: dict[str, tuple[str, list[str]]]) -> None:
    payload = json.dumps({b: [t, ps] for b, (t, ps) in memos.items()}).encode()
    data = f"{FORMAT} {hashlib.sha256(payload).hexdigest()}\n".encode() + payload
    path = os.path.join(agent_dir, NAME)
    tmp = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):  # a cache: without it, the next call diffs in full
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
