"""Restoring a checkpoint into the working tree (used by `restore`, resume and rollback).

Only the paths the plan names are written (`git/restore.py`: the whole target
tree is checked before anything is written, and the writer never follows a
symbolic link); files matching `secret_paths` are never written nor deleted.
Files get the bytes `git checkout` would write (filters, line endings), and a
submodule is checked out at its recorded commit when it is clean and holds it,
else left and named (`git/submodules.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import CkptError
from git_agentckpt.git.restore import RestorePlan, SubmoduleAction, apply_restore, plan_restore
from git_agentckpt.git.submodules import settle_submodules
from git_agentckpt.globs import match_excluded
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.progress import Progress
from git_agentckpt.store.checkpoints import Checkpoint, snapshot_with_progress
from git_agentckpt.store.refs import TaskName

if TYPE_CHECKING:  # the workspace calls this module: no import at run time
    from git_agentckpt.store.workspace import Workspace


@dataclass(frozen=True)
class RestoreResult:
    target: Checkpoint
    written: tuple[str, ...]
    deleted: tuple[str, ...]
    skipped: tuple[str, ...]  # submodules left as they were (`submodules` says why)
    safety: Checkpoint | None
    dry_run: bool
    secret: tuple[str, ...] = ()  # secret paths that differ: never written nor deleted
    agent_kept: tuple[str, ...] = ()  # .agent/ files that differ: never reverted
    submodules: tuple[SubmoduleAction, ...] = ()  # checked out, or left and why

    def to_json(self) -> dict[str, JSON]:
        return {
            "target": self.target.to_json(),
            "written": list(self.written),
            "deleted": list(self.deleted),
            "skipped": list(self.skipped),
            "submodules": [dict(s.to_json()) for s in self.submodules],
            "secret_paths_left": list(self.secret),
            "agent_files_kept": list(self.agent_kept),
            "safety_checkpoint": self.safety.to_json() if self.safety else None,
            "dry_run": self.dry_run,
        }


AGENT_DIR = ".agent"  # the project's settings and contracts: never reverted


def without_kept(
    plan: RestorePlan, patterns: Sequence[str]
) -> tuple[RestorePlan, list[str], list[str]]:
    """The plan minus what restore never touches: (plan, secret files, `.agent/` files).

    A snapshot never holds a secret file's current content (a tracked one keeps
    HEAD's blob), and a checkpoint from another clone may hold anything there:
    restore never reverts, overwrites or deletes a user's `.env`. The project's
    `.agent/` (settings, contracts) is never reverted either: a constraint added
    since the checkpoint stays in force (design section 3, step 2).
    """
    paths = [c.path for c in (*plan.writes, *plan.deletes)]
    secret = sorted(p for p in paths if match_excluded(patterns, p))
    agent = sorted(
        p for p in paths if p not in secret and (p == AGENT_DIR or p.startswith(AGENT_DIR + "/"))
    )
    if not secret and not agent:
        return plan, [], []
    drop = {*secret, *agent}
    return (
        dataclasses.replace(
            plan,
            writes=tuple(c for c in plan.writes if c.path not in drop),
            deletes=tuple(c for c in plan.deletes if c.path not in drop),
        ),
        secret,
        agent,
    )


def restore_checkpoint(ws: Workspace, name: str, dry_run: bool = False) -> RestoreResult:
    """Bring the working tree to checkpoint `name`: the plan (whole tree checked first),
    a light and a full safety checkpoint when the current tree is no checkpoint's, the
    writes, and a `workspace.restore` event."""
    target = ws.resolve(name)
    task = TaskName(target.task)
    ws.require_own(task)  # another worktree's checkpoint: its files, never written here
    current_tree = snapshot_with_progress(ws.repo, ws.settings.secret_paths)
    plan, secret, agent = without_kept(
        plan_restore(
            ws.repo, current_tree, target.tree, label=f"{target.id} of task {target.task}"
        ),
        ws.settings.secret_paths,
    )
    safety: Checkpoint | None = None
    submodules = tuple(settle_submodules(ws.repo, plan.submodules))  # dry run: what it would do
    changes = plan.writes or plan.deletes or any(not s.left for s in submodules)
    if changes and not dry_run:
        known = {c.tree for c in ws.store.chain(task)}
        for t in ws.store.tasks():
            with contextlib.suppress(CkptError):  # a damaged task holds no known tree
                if (tip := ws.store.tip(t)) is not None:
                    known.add(tip.tree)
        if current_tree not in known:
            # the tree just snapshotted is what is on disk: no second `add -A`
            msg = f"safety before restoring {target.id}"
            safety = ws.safety_checkpoint(task, msg, current_tree)
        crash_point("restore.safety")
        # intent first (what will be written, and what undoes it), then the writes, then
        # their completion: a restore killed in between is named by its intent alone
        intent = {
            "written": len(plan.writes),
            "deleted": len(plan.deletes),
            "safety": safety.commit if safety else None,
        }
        links = {"checkpoint": target.commit}
        ws.log.append(task, [NewEvent("workspace.restore", links=links, data=intent)])
        crash_point("restore.logged")
        with Progress("Restoring files", len(plan.writes) + len(plan.deletes)) as meter:
            submodules = apply_restore(ws.repo, plan, meter.advance if meter.active else None)
        done = {**intent, "submodules": [s.path for s in submodules if not s.left]}
        ws.log.append(task, [NewEvent("workspace.restored", links=links, data=done)])
        crash_point("restore.done")
    return RestoreResult(
        target=target,
        written=tuple(c.path for c in plan.writes),
        deleted=tuple(c.path for c in plan.deletes),
        skipped=tuple(s.path for s in submodules if s.left),
        safety=safety,
        dry_run=dry_run,
        secret=tuple(secret),
        agent_kept=tuple(agent),
        submodules=submodules,
    )
