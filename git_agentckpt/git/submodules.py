"""Submodules on restore: bring one to its recorded commit, or leave it and say why.

A checkpoint records a submodule (or a nested repository `git add -A` took
as a gitlink) by the commit its HEAD was at. Restore never writes into a
submodule as files and never discards anything in it: when the recorded
commit differs from its HEAD, the submodule is checked out at that commit
(`git checkout --detach <commit>` run inside it, which keeps untracked files
and refuses to overwrite them) only if

- it is a repository of its own at that path (not an empty, uninitialized
  directory, which git would take for the superproject), reached without a
  symbolic link;
- its work tree is clean (no staged or unstaged change to a tracked file);
- the commit is in it (nothing is fetched).

Otherwise it is left as it is, with the reason, and the caller stops for a
person: resume never records a drifted gitlink as its starting point. A
gitlink the checkpoint does not hold (a nested repository added since) is
never removed, and a submodule missing from the disk is never cloned.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from git_agentckpt.errors import CkptError
from git_agentckpt.git.repo import Change, GitRepo
from git_agentckpt.git.run import error_lines, run_git
from git_agentckpt.git.worktree import GITLINK

CHECKED_OUT = "checked out"
LEFT = "left"


@dataclass(frozen=True)
class SubmoduleAction:
    """What restore did (or would do) to one submodule, and why it did not when it left it."""

    path: str
    commit: str | None  # the recorded commit (None: the checkpoint holds no submodule here)
    action: str  # "checked out" | "left" (before it runs: "check out" | "left")
    why: str  # "restore" when checked out, else the reason it was left

    @property
    def left(self) -> bool:
        return self.action == LEFT

    def to_json(self) -> dict[str, str | None]:
        return {"path": self.path, "commit": self.commit, "action": self.action, "why": self.why}


def settle_submodules(repo: GitRepo, changes: tuple[Change, ...]) -> list[SubmoduleAction]:
    """What restore can do to each gitlink change, without changing anything."""
    return [_settle(repo, ch) for ch in sorted(changes, key=lambda c: c.path)]


def _settle(repo: GitRepo, ch: Change) -> SubmoduleAction:
    if ch.new_mode != GITLINK or ch.new_id is None:
        return SubmoduleAction(ch.path, None, LEFT, "not in the checkpoint: never removed")
    commit = ch.new_id
    full = os.path.join(repo.workdir, ch.path)
    why = _not_a_repository(repo.workdir, ch.path)
    if why:
        return SubmoduleAction(ch.path, commit, LEFT, why)
    try:
        if run_git(["cat-file", "-e", commit + "^{commit}"], cwd=full, check=False).returncode:
            return SubmoduleAction(
                ch.path, commit, LEFT, f"commit {commit[:12]} is not in it: fetch it there"
            )
        dirty = run_git(
            ["status", "--porcelain", "--untracked-files=no", "--ignore-submodules=none"],
            cwd=full,
        ).stdout
    except CkptError as exc:
        return SubmoduleAction(ch.path, commit, LEFT, f"cannot read it: {exc.message}")
    if dirty.strip():
        return SubmoduleAction(ch.path, commit, LEFT, "dirty submodule")
    return SubmoduleAction(ch.path, commit, "check out", "restore")


def _not_a_repository(workdir: str, rel: str) -> str:
    """Why `rel` is not a submodule restore may check out ("" when it is one)."""
    here = workdir
    for part in rel.split("/"):
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return "not checked out (`git submodule update` brings it)"
        if stat.S_ISLNK(st.st_mode):
            return "a symbolic link is on its path"
        if not stat.S_ISDIR(st.st_mode):
            return "a file stands in its place"
    if not os.path.lexists(os.path.join(here, ".git")):
        return "not checked out (`git submodule update` brings it)"
    top = run_git(["rev-parse", "--show-toplevel"], cwd=here, check=False)
    if top.returncode or os.path.realpath(os.fsdecode(top.stdout.strip())) != os.path.realpath(
        here
    ):
        return "not a repository of its own"
    return ""


def bring_back(repo: GitRepo, planned: SubmoduleAction) -> SubmoduleAction:
    """Check the submodule out at its recorded commit, as `settle_submodules` planned."""
    if planned.left or planned.commit is None:
        return planned
    proc = run_git(
        ["checkout", "--detach", "--quiet", planned.commit],
        cwd=os.path.join(repo.workdir, planned.path),
        check=False,
    )
    if proc.returncode != 0:
        lines = error_lines(proc.stderr)
        why = lines[0].removeprefix("error: ") if lines else f"git checkout exit {proc.returncode}"
        return SubmoduleAction(planned.path, planned.commit, LEFT, f"checkout refused: {why}")
    return SubmoduleAction(planned.path, planned.commit, CHECKED_OUT, "restore")
