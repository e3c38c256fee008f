"""Checks of one commit, called for every checkpoint and event-log commit `verify` reads.

The place for checks that look at a single commit object as stored (its
headers, its signature). `verify` has already rehashed it (`RawCommit.intact`)
and checks its content and place in the trail itself. A check returns
problems, never raises: verify catches what escapes anyway, as `unreadable`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from git_agentckpt.audit.problems import Problem
from git_agentckpt.git.audit_read import RawCommit
from git_agentckpt.git.repo import GitRepo


@dataclass(frozen=True)
class CommitContext:
    repo: GitRepo
    task: str


# role: "checkpoint" (a commit of refs/agent/checkpoints/<task>) or "event" (of the log)
CommitCheck = Callable[[CommitContext, RawCommit, str], list[Problem]]

# Checks run on every commit, in order (signatures plug in here).
COMMIT_CHECKS: list[CommitCheck] = []


def check_commit(ctx: CommitContext, commit: RawCommit, role: str) -> list[Problem]:
    out: list[Problem] = []
    for check in COMMIT_CHECKS:
        out.extend(check(ctx, commit, role))
    return out
