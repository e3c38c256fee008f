"""The running estimate of what a full snapshot costs in this repository (per worktree).

Kept in `.git/agent/snapshot-cost.json`, never pushed: an exponentially
weighted mean of measured full checkpoints, read by the 5% rule of `tick`.
"""

from __future__ import annotations

import json
import os

from git_agentckpt.git.repo import GitRepo

ALPHA = 0.3  # weight of the newest measurement


def _path(repo: GitRepo) -> str:
    from git_agentckpt.git.worktree import agent_dir  # not at start-up: `list` needs none

    return os.path.join(agent_dir(repo), "snapshot-cost.json")


def read_cost(repo: GitRepo) -> float | None:
    try:
        with open(_path(repo), encoding="utf-8") as fh:
            data = json.load(fh)
        value = data.get("ewma_seconds")
        return float(value) if isinstance(value, int | float) else None
    except (OSError, ValueError, AttributeError):
        return None


def record_cost(repo: GitRepo, seconds: float) -> float:
    old = read_cost(repo)
    new = seconds if old is None else ALPHA * seconds + (1 - ALPHA) * old
    path = _path(repo)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"v": 1, "ewma_seconds": new, "last_seconds": seconds}, fh)
    os.replace(tmp, path)
    return new
