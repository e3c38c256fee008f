"""Writing a tree back to the working tree: restore plans, and exporting a tree.

Only `restore` writes the user's working tree, and only the paths its plan
names; paths are checked (no `..`, no absolute paths, no symlinked parent) so
a crafted tree cannot write outside the working tree.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import OperationFailed, UsageError
from git_agentckpt.git.repo import Change, GitRepo
from git_agentckpt.git.worktree import GITLINK, SYMLINK


@dataclass(frozen=True)
class RestorePlan:
    writes: tuple[Change, ...]  # A / M / T: bring to new_id
    deletes: tuple[Change, ...]  # D: remove
    skipped: tuple[str, ...]  # gitlinks (nested repositories) are never written


def _check_path(path: str) -> None:
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UsageError(f"refusing unsafe path in snapshot: {path!r}")
    if any(p.lower() == ".git" for p in parts):
        raise UsageError(f"refusing to write inside .git: {path!r}")


def _check_no_symlink_parent(root: str, path: str) -> None:
    current = root
    for part in path.split("/")[:-1]:
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(
                f"refusing to write {path!r}: "
                f"{os.path.relpath(current, root)!r} is a symbolic link",
                hint="remove the link or restore into a clean clone",
            )


def _case_insensitive_fs(repo: GitRepo) -> bool:
    probe = os.path.join(repo.git_dir, "HEAD")
    return os.path.exists(os.path.join(repo.git_dir, "head")) and os.path.exists(probe)


def plan_restore(repo: GitRepo, current_tree: str, target_tree: str) -> RestorePlan:
    changes = repo.diff_trees(current_tree, target_tree)
    writes: list[Change] = []
    deletes: list[Change] = []
    skipped: list[str] = []
    for ch in changes:
        _check_path(ch.path)
        if ch.new_mode == GITLINK or ch.old_mode == GITLINK:
            skipped.append(ch.path)
        elif ch.status == "D":
            deletes.append(ch)
        else:
            writes.append(ch)
    if _case_insensitive_fs(repo):
        seen: dict[str, str] = {}
        for f in repo.tree_files(target_tree):
            key = f.path.lower()
            if key in seen:
                raise UsageError(
                    f"refusing to restore: {seen[key]!r} and {f.path!r} collide on this "
                    "case-insensitive file system"
                )
            seen[key] = f.path
    return RestorePlan(tuple(writes), tuple(deletes), tuple(skipped))


def apply_restore(repo: GitRepo, plan: RestorePlan) -> None:
    root = repo.workdir
    for ch in plan.writes + plan.deletes:
        _check_no_symlink_parent(root, ch.path)
    for ch in sorted(plan.deletes, key=lambda c: c.path.count("/"), reverse=True):
        full = os.path.join(root, ch.path)
        if (os.path.lexists(full) and not os.path.isdir(full)) or os.path.islink(full):
            os.unlink(full)
        _prune_empty_dirs(root, os.path.dirname(ch.path))
    for ch in plan.writes:
        assert ch.new_id is not None
        _write_file(root, ch.path, repo.read_blob(ch.new_id), ch.new_mode)
        crash_point("restore.write")


def _prune_empty_dirs(root: str, rel: str) -> None:
    while rel:
        try:
            os.rmdir(os.path.join(root, rel))
        except OSError:
            return
        rel = os.path.dirname(rel)


def _write_file(root: str, rel: str, data: bytes, mode: int) -> None:
    full = os.path.join(root, rel)
    parent = os.path.dirname(full)
    # a file standing where a directory must be (type change) goes first
    probe = root
    for part in rel.split("/")[:-1]:
        probe = os.path.join(probe, part)
        if os.path.lexists(probe) and not os.path.isdir(probe):
            os.unlink(probe)
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(full) and not os.path.islink(full):
        if os.listdir(full):
            raise OperationFailed(
                f"cannot restore {rel!r}: a non-empty directory is in the way",
                hint="move it away and run restore again",
            )
        os.rmdir(full)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".ckpt-restore-")
    try:
        if mode == SYMLINK:
            os.close(fd)
            os.unlink(tmp)
            os.symlink(os.fsdecode(data), tmp)
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o755 if mode & 0o111 else 0o644)
        os.replace(tmp, full)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def export_tree(repo: GitRepo, tree_id: str, dest: str) -> None:
    """Write every file of a tree under `dest` (a scratch directory, never the work tree)."""
    for f in repo.tree_files(tree_id):
        _check_path(f.path)
        if f.mode == GITLINK:
            continue
        target = os.path.join(dest, f.path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        data = repo.read_blob(f.id)
        if f.mode == SYMLINK:
            os.symlink(os.fsdecode(data), target)
        else:
            with open(target, "wb") as fh:
                fh.write(data)
            if f.mode & 0o111:
                os.chmod(target, 0o755)
