"""Writing a tree back to the working tree: restore plans, and exporting a tree.

Only `restore` writes the user's working tree, and only the paths its plan
names. Before anything is written, the whole target tree passes
`tree_check.check_tree` (no `..`, no `.git` or its aliases, no duplicate or
colliding names, no symbolic link leading outside), and every write goes
through `SafeWriter`, which never follows a symbolic link below the root, so
a crafted tree cannot write outside the working tree.

Files get the bytes `git checkout` would write, not the blobs as stored: a
smudge filter, `eol=crlf`, `core.autocrlf` apply (`git/convert.py`, one git
process for the whole restore, none when no attribute applies). git converts;
this module writes, so git never writes into the working tree itself. A
failing filter stops the restore before anything is written.

Submodules (gitlinks, and nested repositories snapshotted as gitlinks) are
never written as files: `git/submodules.py` brings one to its recorded
commit when its work tree is clean and holds that commit, and leaves it (with
the reason) otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.git.convert import checkout_bytes
from git_agentckpt.git.repo import Change, GitRepo, TreeFile
from git_agentckpt.git.safe_write import SafeWriter
from git_agentckpt.git.submodules import SubmoduleAction, bring_back, settle_submodules
from git_agentckpt.git.tree_check import check_tree
from git_agentckpt.git.worktree import GITLINK

__all__ = ["RestorePlan", "SubmoduleAction", "apply_restore", "export_tree", "plan_restore"]


@dataclass(frozen=True)
class RestorePlan:
    writes: tuple[Change, ...]  # A / M / T: bring to new_id
    deletes: tuple[Change, ...]  # D: remove
    skipped: tuple[str, ...]  # gitlinks: never written as files (see `submodules`)
    target_tree: str = ""  # its `.gitattributes` decide the conversion ("": those on disk)
    submodules: tuple[Change, ...] = ()  # the gitlink changes, for `git/submodules.py`


def plan_restore(repo: GitRepo, current_tree: str, target_tree: str, *, label: str) -> RestorePlan:
    """What restoring `target_tree` writes and deletes; refuses an unsafe tree (exit 6).

    `label` names the checkpoint in the error.
    """
    check_tree(repo, target_tree, repo.workdir, label)
    writes: list[Change] = []
    deletes: list[Change] = []
    gitlinks: list[Change] = []
    for ch in repo.diff_trees(current_tree, target_tree):
        if ch.new_mode == GITLINK or ch.old_mode == GITLINK:
            gitlinks.append(ch)
        elif ch.status == "D":
            deletes.append(ch)
        else:
            writes.append(ch)
    return RestorePlan(
        tuple(writes),
        tuple(deletes),
        tuple(c.path for c in gitlinks),
        target_tree,
        tuple(gitlinks),
    )


def apply_restore(
    repo: GitRepo, plan: RestorePlan, on_file: Callable[[], None] | None = None
) -> tuple[SubmoduleAction, ...]:
    """Write the plan: deletes (deepest first, pruning emptied directories), then writes,
    then submodules brought to their recorded commits (what happened to each).
    `on_file` is called after each file deleted or written (a progress meter).

    Refused before anything is written: a path whose directory is a symbolic
    link (one that turns into a link meanwhile fails that write), and a file
    whose smudge filter fails.
    """
    settled = settle_submodules(repo, plan.submodules)  # only looks
    with SafeWriter(repo.workdir) as writer:
        for ch in plan.writes + plan.deletes:
            writer.check_parents(ch.path)
        files = [TreeFile(c.path, c.new_id or "", c.new_mode) for c in plan.writes]
        with checkout_bytes(repo, files, plan.target_tree or None) as data:
            for ch in sorted(plan.deletes, key=lambda c: c.path.count("/"), reverse=True):
                writer.remove(ch.path)
                if on_file is not None:
                    on_file()
            for ch in plan.writes:
                assert ch.new_id is not None
                writer.write(ch.path, data.read(ch.path, ch.new_id), ch.new_mode)
                crash_point("restore.write")
                if on_file is not None:
                    on_file()
    return tuple(bring_back(repo, s) for s in settled)


def export_tree(repo: GitRepo, tree_id: str, dest: str, *, label: str) -> None:
    """Write every file of a tree under `dest`, a new empty directory (never the work tree),
    with the bytes `git checkout` of that tree would write."""
    check_tree(repo, tree_id, dest, label)
    files = sorted((f for f in repo.tree_files(tree_id) if f.mode != GITLINK), key=lambda f: f.path)
    with SafeWriter(dest) as writer, checkout_bytes(repo, files, tree_id) as data:
        for f in files:
            writer.write(f.path, data.read(f.path, f.id), f.mode, fresh=True)
