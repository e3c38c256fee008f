"""The watched files of a task (those no snapshot holds, under path-check globs).

`watch.py` keeps the record and decides "changed" by content; this module
ties it to a task and its contract: which globs (the contract's
`forbidden_paths` / `protected_paths`), which changes count (only the files
the snapshot does not hold: the snapshot comparison sees the others), and
`git ckpt check --rebaseline`, a person's acceptance of the current content.

Rebaseline is a person's decision, like approving a command (design section
5): the command line asks at a terminal, shows each path, and nothing is
accepted without a "yes". What was accepted is logged as a
`constraint.rebaseline` event (a type only the tool writes) naming who and
which files appeared, went or changed. Only the watch record moves: a tracked
or snapshotted file that differs from the task's baseline still counts as
written, and its constraint still fails (that history is git's).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from git_agentckpt.contracts import watch
from git_agentckpt.contracts.schema import Contract, load_contract_dir
from git_agentckpt.contracts.watch import WatchDiff
from git_agentckpt.errors import ConflictError
from git_agentckpt.git.worktree import agent_dir, snapshot_and_changes
from git_agentckpt.globs import match_excluded
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.settings import CONTRACTS_DIR
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

REBASELINE_EVENT = "constraint.rebaseline"


def contract_globs(contract: Contract | None) -> list[str]:
    """The globs of the contract's `forbidden_paths` / `protected_paths` checks."""
    pairs: list[tuple[str, Sequence[str]]] = []
    for c in contract.constraints if contract is not None else ():
        paths = c.check.params.get("paths") if c.check is not None else None
        if c.check is not None and isinstance(paths, list | tuple):
            pairs.append((c.check.kind, [p for p in paths if isinstance(p, str)]))
    return watch.watched_globs(pairs)


def _contract(ck: Workspace) -> Contract | None:
    return load_contract_dir(Path(ck.repo.workdir) / CONTRACTS_DIR, shown_as=CONTRACTS_DIR)


def record_watched(ck: Workspace, task: TaskName) -> None:
    """At task start: what the directories of the contract's path globs hold now."""
    globs = contract_globs(_contract(ck))
    if globs:
        watch.record(agent_dir(ck.repo), task.name, ck.repo.workdir, globs)


def _not_in(ck: Workspace, tree: str) -> Callable[[str], bool]:
    """Whether a path is one the snapshot `tree` does not hold (its comparison sees the
    others; a tracked secret file is in the tree, as HEAD's blob)."""
    repo, secret = ck.repo, ck.settings.secret_paths
    return lambda path: match_excluded(secret, path) or repo.tree_entry(tree, path) is None


def watched_changes(
    ck: Workspace, task: TaskName, contract: Contract | None, tree: str
) -> set[str]:
    """Watched files that appeared, went or changed content since the task's record,
    among those the snapshot `tree` does not hold."""
    outside = _not_in(ck, tree)
    return watch.changed_since_start(
        agent_dir(ck.repo),
        task.name,
        ck.repo.workdir,
        contract_globs(contract),
        lambda path: not outside(path),
    )


def _only(diff: WatchDiff, keep: Callable[[str], bool]) -> WatchDiff:
    return WatchDiff(
        tuple(p for p in diff.added if keep(p)),
        tuple(p for p in diff.removed if keep(p)),
        tuple(p for p in diff.changed if keep(p)),
    )


def _current_tree(ck: Workspace) -> str:
    repo = ck.repo
    head = repo.head()
    base = repo.read_commit(head).tree if head else repo.empty_tree()
    tree, _ = snapshot_and_changes(repo, ck.settings.secret_paths, base)
    return tree


def pending_rebaseline(ck: Workspace, task: str | None) -> tuple[TaskName, WatchDiff]:
    """The task, and what `--rebaseline` would accept now (the watched files that no
    snapshot holds and that appeared, went or changed since the record)."""
    t = ck.require_task(task)
    globs = contract_globs(_contract(ck))
    if not globs:
        return t, WatchDiff()
    diff = watch.changes(agent_dir(ck.repo), t.name, ck.repo.workdir, globs)
    return t, _only(diff, _not_in(ck, _current_tree(ck)))


@dataclass(frozen=True)
class Rebaselined:
    task: str
    accepted: WatchDiff
    event: str | None  # the id of the constraint.rebaseline event (None: nothing accepted)

    def to_json(self) -> dict[str, JSON]:
        return {
            "task": self.task,
            "accepted": dict(self.accepted.to_json()),
            "event": self.event,
        }


def rebaseline(ck: Workspace, task: TaskName, shown: WatchDiff) -> Rebaselined:
    """Accept the current content of the watched files, as a person just saw it
    (`shown`, from `pending_rebaseline`); refused when it changed since."""
    globs = contract_globs(_contract(ck))
    if not shown or not globs:
        return Rebaselined(task.name, WatchDiff(), None)
    outside = _not_in(ck, _current_tree(ck))
    done = watch.rebaseline(
        agent_dir(ck.repo),
        task.name,
        ck.repo.workdir,
        globs,
        accept=lambda diff: _only(diff, outside) == shown,
    )
    if done is None:
        raise ConflictError(
            "the watched files changed while you were deciding: nothing was accepted",
            hint="run `git ckpt check --rebaseline` again",
        )
    user = getpass.getuser()
    files = shown.to_json()
    counts = ", ".join(f"{len(v)} {k}" for k, v in files.items() if v)
    data: dict[str, JSON] = {
        "message": f"{user} accepted the current content of the watched files ({counts})",
        "by": user,
        "files": dict(files),
        "globs": list(globs),
    }
    (ev,) = ck.log.append(
        task, [NewEvent(REBASELINE_EVENT, actor={"agent": f"human:{user}"}, data=data)]
    )
    return Rebaselined(task.name, shown, ev.id)
