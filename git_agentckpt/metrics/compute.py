"""`git ckpt metrics`: recovery quality per resume and per task, from the event log and
the recovery reports alone (a fetched trail works: no work tree is read).

`task_metrics` reads the log once (oldest first) and the reports of its resumes;
the checkpoint trees of the after windows are read for the file figure.

The `recovery.metrics` events that add these figures to each report once its
window has passed are written by `recording.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from git_agentckpt.errors import CkptError, UsageError
from git_agentckpt.metrics.recording import (
    DEFAULT_WINDOW,
    METRICS_EVENT,
    reports,
    task_finished,
)
from git_agentckpt.metrics.resumes import resume_figures, totals
from git_agentckpt.metrics.timeline import STEP_START, ResumeSpan, find_resumes
from git_agentckpt.model import JSON, Event
from git_agentckpt.recovery.report import read_report
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

MAX_WINDOW = 10_000

__all__ = ["DEFAULT_WINDOW", "METRICS_EVENT", "figures_of", "metrics", "task_metrics"]


class _RepoTrees:
    """`figures.Trees` over the repository; a missing object reads as None."""

    def __init__(self, ws: Workspace) -> None:
        self.repo = ws.repo
        self._trees: dict[str, str | None] = {}

    def tree_of(self, commit: str) -> str | None:
        if commit not in self._trees:
            try:
                self._trees[commit] = self.repo.read_commit(commit).tree
            except CkptError:
                self._trees[commit] = None
        return self._trees[commit]

    def blob_at(self, tree: str, path: str) -> str | None:
        try:
            found = self.repo.tree_entry(tree, path)
        except CkptError:
            return None
        return found[0] if found is not None and found[1] != 0o040000 else None

    def changes(self, old_tree: str, new_tree: str) -> list[tuple[str, str | None]]:
        try:
            return [(c.path, c.new_id) for c in self.repo.diff_trees(old_tree, new_tree)]
        except CkptError:
            return []

    def blob(self, oid: str) -> bytes | None:
        try:
            return self.repo.read_blob(oid)
        except CkptError:
            return None


def check_window(window: int) -> int:
    if not 1 <= window <= MAX_WINDOW:
        raise UsageError(f"--window must be between 1 and {MAX_WINDOW} steps, not {window}")
    return window


def _worktree(events: Sequence[Event], ws: Workspace) -> str | None:
    for ev in events[:4]:
        state = ev.data.get("state") if ev.type == "task.start" else None
        where = state.get("worktree") if isinstance(state, dict) else None
        if isinstance(where, dict) and isinstance(where.get("path"), str):
            return str(where["path"])
    return ws.repo.workdir or None


def _report(ws: Workspace, task: TaskName, report_id: str) -> dict[str, JSON]:
    try:
        return read_report(ws.repo, task, report_id)
    except CkptError:
        return {}


def figures_of(
    ws: Workspace,
    task: TaskName,
    events: Sequence[Event],
    spans: Sequence[ResumeSpan],
    window: int,
    recorded: set[str],
) -> list[dict[str, JSON]]:
    trees = _RepoTrees(ws)
    where = _worktree(events, ws)
    return [
        resume_figures(
            events,
            span,
            task=task.name,
            window=window,
            report=_report(ws, task, span.report),
            trees=trees,
            worktree=where,
            recorded=span.report in recorded,
        )
        for span in spans
    ]


def _steps(events: Sequence[Event]) -> dict[str, JSON]:
    ids = [ev.links.get("step") for ev in events if ev.type == STEP_START]
    distinct = len({s for s in ids if isinstance(s, str)})
    return {
        "executions": len(ids),
        "distinct": distinct,
        "redone": len(ids) - distinct,
        "ratio": round(len(ids) / distinct, 4) if distinct else None,
    }


def task_metrics(ws: Workspace, task: TaskName, window: int = DEFAULT_WINDOW) -> dict[str, JSON]:
    """Every resume of `task` and the task's totals (the log read once)."""
    events = ws.log.read(task)
    spans = find_resumes(events, window, task_finished(ws, task))
    resumes = figures_of(ws, task, events, spans, window, reports(events, METRICS_EVENT))
    steps = _steps(events)
    sums = totals(resumes)
    sums["step_executions"] = steps["executions"]
    sums["steps_distinct"] = steps["distinct"]
    return {
        "task": task.name,
        "events": len(events),
        "steps": steps,
        "resumes": list(resumes),
        "totals": sums,
    }


def _unless_damaged(ws: Workspace, task: TaskName, window: int) -> dict[str, JSON] | None:
    """`task_metrics`, or None when the task's records are damaged: named in a warning,
    the other tasks counted (a task named on the command line fails instead)."""
    try:
        return task_metrics(ws, task, window)
    except CkptError as exc:
        ws.store.warn(f"task {task}: {exc.one_line()} (skipped)")
        return None


def metrics(
    ws: Workspace, names: Sequence[str] = (), window: int = DEFAULT_WINDOW
) -> dict[str, JSON]:
    """The metrics of the tasks named (none: every task with an event log)."""
    check_window(window)
    started = time.perf_counter()
    if names:
        rows = [task_metrics(ws, ws.require_task(n), window) for n in names]
    else:
        rows = [row for t in ws.log.tasks() if (row := _unless_damaged(ws, t, window))]
    sums: dict[str, JSON] = {"tasks": len(rows)}
    for row in rows:
        part = row["totals"]
        assert isinstance(part, dict)
        for key, value in part.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                old = sums.get(key)
                sums[key] = (old if isinstance(old, int | float) else 0) + value
            else:
                sums.setdefault(key, None)
    if isinstance(sums.get("seconds_to_confirm"), float):
        sums["seconds_to_confirm"] = round(float(sums["seconds_to_confirm"] or 0), 3)
    return {
        "v": 1,
        "window": window,
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        "tasks": list(rows),
        "totals": sums,
    }
