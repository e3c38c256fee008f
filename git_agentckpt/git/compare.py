"""How the working tree differs from a tree: workspace verification (resume step 2).

Outside the daemon, one `git status` on the private index with a shadow git dir
whose HEAD is the expected tree (`git/shadow.py`); in the daemon, a snapshot of
what the watcher saw change and a tree diff (`git/incremental.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import suppress

from git_agentckpt.errors import OperationFailed
from git_agentckpt.git import direct_tree, watch_view
from git_agentckpt.git.convert import hash_worktree_files
from git_agentckpt.git.repo import Change, GitRepo
from git_agentckpt.git.run import run_git
from git_agentckpt.git.shadow import shadow_git_dir
from git_agentckpt.git.syserr import translated
from git_agentckpt.git.worktree import agent_dir, locked, prepare_index, snapshot_and_changes


def compare_worktree(
    repo: GitRepo, expected_tree: str, secret_paths: Sequence[str]
) -> tuple[list[Change], str | None]:
    """The working tree's differences from `expected_tree` (and the tree, when clean).

    Each change has its path and status; blob ids are given where they are known
    without hashing (most paths have none: verification needs only the paths).

    About the cost of `git status`: one `git status` on the private index, run with
    a shadow git dir whose HEAD is the expected tree (`git/shadow.py`), so its HEAD
    side is the expected tree against the index (skipping unchanged directories by
    the cache-tree) and its other side the index against the working tree, through
    the stat cache. (Without the shadow: the same `status` plus a `diff-index
    --cached`.) Nothing is written; the paths where the two disagree are settled
    by hashing those files as `git add` would, filters and line endings applied
    (`git/convert.py`: no process when no attribute or autocrlf applies, else one
    `git hash-object --stdin-paths` for them all), so a file git calls unchanged
    is unchanged here too. When the working tree differs, the caller snapshots it
    with `snapshot_tree` if it needs the tree.
    """
    with translated("cannot compare the working tree", repo.git_dir):
        if watch_view.active_for(repo.workdir) is not None:
            return _compare_by_snapshot(repo, expected_tree, secret_paths)
        try:
            return _compare_worktree(repo, expected_tree, secret_paths)
        except OperationFailed:
            # The private index is a cache (a split one whose shared part git expired,
            # or a corrupt one): rebuild it from the user's index once, as a snapshot does.
            with locked(os.path.join(agent_dir(repo), "index.flock")), suppress(FileNotFoundError):
                os.unlink(os.path.join(agent_dir(repo), "index"))
            return _compare_worktree(repo, expected_tree, secret_paths)


def _compare_by_snapshot(
    repo: GitRepo, expected_tree: str, secret_paths: Sequence[str]
) -> tuple[list[Change], str | None]:
    """In the daemon, with its work-tree watcher: a snapshot costs what changed since
    the last one (`incremental.py`), and a tree diff skips every subtree the two share.
    A path whose type changed is one `M`, as `git status` reports it."""
    tree, _ = snapshot_and_changes(repo, secret_paths, None)
    by_path: dict[str, Change] = {}
    for change in repo.diff_trees(expected_tree, tree):
        seen = by_path.get(change.path)
        if seen is None:
            by_path[change.path] = change
            continue
        gone, came = (seen, change) if seen.status == "D" else (change, seen)
        by_path[change.path] = Change(
            "M", change.path, gone.old_id, came.new_id, gone.old_mode, came.new_mode
        )
    changes = [by_path[p] for p in sorted(by_path)]
    return changes, (expected_tree if not changes else None)


def _compare_worktree(
    repo: GitRepo, expected_tree: str, secret_paths: Sequence[str]
) -> tuple[list[Change], str | None]:
    base = agent_dir(repo)
    status_args = [
        "status",
        "--porcelain=v2",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=dirty",  # a nested repository changes by its HEAD only
    ]
    with locked(os.path.join(base, "index.flock")):
        env, config = prepare_index(repo, secret_paths)
        direct_tree.catch_up(repo, base, env, config)  # the last tree, where it is behind
        shadow = shadow_git_dir(repo, base, expected_tree)
        if shadow is not None:  # one `git status` whose HEAD is the expected tree
            out = run_git(
                ["--git-dir", shadow, "--work-tree", repo.workdir, *config, *status_args],
                cwd=repo.workdir,
                env=env,
            ).stdout
            by_index = {c.path: c for c in _parse_status_heads(out)}
            worktree = _parse_status(out)
        else:
            status = run_git([*config, *status_args], cwd=repo.workdir, env=env).stdout
            staged = run_git(
                ["diff-index", "--cached", "--raw", "-z", "--no-renames", expected_tree],
                cwd=repo.workdir,
                env=env,
            ).stdout
            by_index = {c.path: c for c in _parse_raw(staged)}  # expected -> index
            worktree = _parse_status(status)  # index -> working tree: path -> M | D | T | ?
    if not by_index and not worktree:
        return [], expected_tree
    # Both sides moved: settled by the file itself, hashed as `git add` would (filters
    # and line endings applied, in one process for them all: `git/convert.py`).
    settle = [p for p in by_index if worktree.get(p, "D") != "D"]
    settle += [p for p, how in worktree.items() if how == "?/" and p not in by_index]
    hashed = hash_worktree_files(repo, settle, env) if settle else {}
    changes: list[Change] = []
    for path in sorted(set(by_index) | set(worktree)):
        entry = by_index.get(path)
        if entry is None:
            # the index holds the expected entry here, so status alone tells the change
            # (git status compared the contents itself): nothing to hash or look up
            if worktree[path] == "?/" and hashed[path] is None:
                continue  # a nested repository without a commit: never snapshotted
            letter = {"?": "A", "?/": "A", "D": "D"}.get(worktree[path], "M")
            changes.append(Change(letter, path, None, None, 0, 0))
            continue
        old = (entry.old_id, entry.old_mode) if entry.old_id else None
        if path in worktree:  # both sides moved: settle it by the file itself
            now = hashed.get(path) if worktree[path] != "D" else None
        else:  # the working tree matches the index
            now = (entry.new_id, entry.new_mode) if entry.new_id else None
        if old is None and now is None:
            continue
        if old is not None and now is not None and old == now:
            continue
        status_letter = "A" if old is None else "D" if now is None else "M"
        changes.append(
            Change(
                status=status_letter,
                path=path,
                old_id=old[0] if old else None,
                new_id=now[0] if now else None,
                old_mode=old[1] if old else 0,
                new_mode=now[1] if now else 0,
            )
        )
    return changes, (expected_tree if not changes else None)


def _parse_status(out: bytes) -> dict[str, str]:
    """`git status --porcelain=v2 -z`: paths whose working-tree side differs from the index."""
    result: dict[str, str] = {}
    for rec in out.split(b"\0"):
        if rec.startswith(b"? "):
            path = os.fsdecode(rec[2:])
            # "dir/" is a nested repository: "?/" so the caller checks its HEAD
            result[path.rstrip("/")] = "?/" if path.endswith("/") else "?"
        elif rec.startswith(b"1 "):
            parts = rec.split(b" ", 8)
            worktree_side = parts[1][1:2].decode()
            if worktree_side != ".":
                result[os.fsdecode(parts[8])] = worktree_side
    return result


def _parse_status_heads(out: bytes) -> list[Change]:
    """`git status --porcelain=v2 -z` entries whose HEAD side differs from the index.

    `1 XY sub mH mI mW hH hI path`: X is HEAD -> index (here HEAD is the expected
    tree), so these are the records `diff-index --cached` would give.
    """
    changes: list[Change] = []
    for rec in out.split(b"\0"):
        if not rec.startswith(b"1 "):
            continue
        parts = rec.split(b" ", 8)
        side = parts[1][:1].decode()
        if side == ".":
            continue
        m_head, m_index = int(parts[3], 8), int(parts[4], 8)
        h_head, h_index = parts[6].decode(), parts[7].decode()
        zero = "0" * len(h_head)
        changes.append(
            Change(
                status=side,
                path=os.fsdecode(parts[8]),
                old_id=None if side == "A" or h_head == zero else h_head,
                new_id=None if side == "D" or h_index == zero else h_index,
                old_mode=0 if side == "A" else m_head,
                new_mode=0 if side == "D" else m_index,
            )
        )
    return changes


def _parse_raw(out: bytes) -> list[Change]:
    """`git diff-index --raw -z` records: `:old_mode new_mode old new S\0path\0`."""
    fields = out.split(b"\0")
    changes: list[Change] = []
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i], fields[i + 1]
        if not meta.startswith(b":"):
            continue
        old_mode, new_mode, old, new, status = meta[1:].decode().split(" ")
        zero = "0" * len(old)
        changes.append(
            Change(
                status=status[:1],
                path=os.fsdecode(path),
                old_id=None if old == zero else old,
                new_id=None if new == zero else new,
                old_mode=int(old_mode, 8),
                new_mode=int(new_mode, 8),
            )
        )
    return changes
