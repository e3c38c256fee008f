"""Resume step 3: run the assertions stored with a checkpoint, and find a rollback target.

Assertions are data (`refs/notes/agent/assertions`): declarative checks run
here in-process; `command` checks run only when this user trusts that exact
argv (see contracts/trust.py), otherwise they are reported `untrusted`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from git_agentckpt.contracts.checks import CheckContext, CheckResult, run_check
from git_agentckpt.contracts.schema import Check, ContractError, parse_assertions
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.restore import export_tree
from git_agentckpt.model import JSON
from git_agentckpt.store.checkpoints import Checkpoint, CheckpointStore

CommandRunner = Callable[[Check], CheckResult]
FAILING = ("fail", "error")


@dataclass
class AssertionRun:
    checkpoint: str
    results: list[dict[str, JSON]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(r["status"] in FAILING for r in self.results)

    def to_json(self) -> dict[str, JSON]:
        return {"checkpoint": self.checkpoint, "passed": self.passed, "results": self.results}


def _changed(repo: GitRepo, ckpt: Checkpoint, tree: str) -> frozenset[str]:
    base = repo.empty_tree() if ckpt.baseline is None else repo.read_commit(ckpt.baseline).tree
    return frozenset(c.path for c in repo.diff_trees(base, tree))


def run_assertions(
    store: CheckpointStore,
    ckpt: Checkpoint,
    workdir: str,
    tree: str,
    runner: CommandRunner | None,
) -> AssertionRun:
    """Evaluate `ckpt`'s assertions against the files in `workdir` (whose tree is `tree`)."""
    out = AssertionRun(ckpt.commit)
    raw = store.assertions_note(ckpt.commit)
    if not raw:
        return out
    try:
        assertions = parse_assertions(raw, source=f"assertions of {ckpt.id}")
    except ContractError as exc:
        out.results.append({"id": "(note)", "status": "error", "detail": exc.one_line()})
        return out
    changed = _changed(store.repo, ckpt, tree)
    ctx = CheckContext(
        workdir=Path(workdir), changed_paths=changed, written_paths=changed, command_runner=runner
    )
    for a in assertions:
        result = run_check(a.check, ctx)
        out.results.append(
            {"id": a.id, "kind": a.check.kind, "status": result.status, "detail": result.detail}
        )
    return out


def find_rollback(
    store: CheckpointStore,
    start: Checkpoint,
    skip: set[str],
    runner: CommandRunner | None,
) -> tuple[Checkpoint | None, list[AssertionRun]]:
    """The newest earlier checkpoint whose assertions pass on its own tree, and every try."""
    tried: list[AssertionRun] = []
    current = start.parent
    while current:
        ckpt = store.get(current)
        if ckpt.task != start.task:
            break
        current = ckpt.parent
        if ckpt.commit in skip:
            continue
        with tempfile.TemporaryDirectory(prefix="ckpt-rollback-") as scratch:
            export_tree(store.repo, ckpt.tree, scratch, label=f"{ckpt.id} of task {ckpt.task}")
            run = run_assertions(store, ckpt, scratch, ckpt.tree, runner)
        tried.append(run)
        if run.passed:
            return ckpt, tried
    return None, tried
