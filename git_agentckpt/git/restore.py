"""Writing a tree back to the working tree: restore plans, and exporting a tree.

Only `restore` writes the user's working tree, and only the paths its plan
names. Before anything is written, the whole target tree passes
`tree_check.check_tree` (no `..`, no `.git` or its aliases, no duplicate or
colliding names, no symbolic link leading outside), and every write goes
through `SafeWriter`, which never follows a symbolic link below the root, so
a crafted tree cannot write outside the working tree.
"""

from __future__ import annotations

from dataclasses import dataclass

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.git.repo import Change, GitRepo
from git_agentckpt.git.safe_write import SafeWriter
from git_agentckpt.git.tree_check import check_tree
from git_agentckpt.git.worktree import GITLINK


@dataclass(frozen=True)
class RestorePlan:
    writes: tuple[Change, ...]  # A / M / T: bring to new_id
    deletes: tuple[Change, ...]  # D: remove
    skipped: tuple[str, ...]  # gitlinks (nested repositories) are never written


def plan_restore(repo: GitRepo, current_tree: str, target_tree: str, *, label: str) -> RestorePlan:
    """What restoring `target_tree` writes and deletes; refuses an unsafe tree (exit 6).

    `label` names the checkpoint in the error.
    """
    check_tree(repo, target_tree, repo.workdir, label)
    writes: list[Change] = []
    deletes: list[Change] = []
    skipped: list[str] = []
    for ch in repo.diff_trees(current_tree, target_tree):
        if ch.new_mode == GITLINK or ch.old_mode == GITLINK:
            skipped.append(ch.path)
        elif ch.status == "D":
            deletes.append(ch)
        else:
            writes.append(ch)
    return RestorePlan(tuple(writes), tuple(deletes), tuple(skipped))


def apply_restore(repo: GitRepo, plan: RestorePlan) -> None:
    """Write the plan: deletes (deepest first, pruning emptied directories), then writes.

    A path whose directory is a symbolic link is refused before anything is
    written; one that turns into a link meanwhile fails that write.
    """
    with SafeWriter(repo.workdir) as writer:
        for ch in plan.writes + plan.deletes:
            writer.check_parents(ch.path)
        for ch in sorted(plan.deletes, key=lambda c: c.path.count("/"), reverse=True):
            writer.remove(ch.path)
        for ch in plan.writes:
            assert ch.new_id is not None
            writer.write(ch.path, repo.read_blob(ch.new_id), ch.new_mode)
            crash_point("restore.write")


def export_tree(repo: GitRepo, tree_id: str, dest: str, *, label: str) -> None:
    """Write every file of a tree under `dest`, a new empty directory (never the work tree)."""
    check_tree(repo, tree_id, dest, label)
    files = sorted((f for f in repo.tree_files(tree_id) if f.mode != GITLINK), key=lambda f: f.path)
    with SafeWriter(dest) as writer:
        for f in files:
            writer.write(f.path, repo.read_blob(f.id), f.mode, fresh=True)
