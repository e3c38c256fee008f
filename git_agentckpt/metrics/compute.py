"""`git ckpt metrics`: recovery quality per resume and per task, from the event log and
the recovery reports alone (a fetched trail works: no work tree is read).

`task_metrics` reads the log once (oldest first) and the reports of its resumes;
the checkpoint trees of the after windows are read for the file figure.

`record_due` writes, for each resume whose after window has passed and that has no
`recovery.metrics` event yet, one `recovery.metrics` event (a tool-only type: the
`recovery` namespace) with its figures at the default window; nothing is rewritten.
The facade calls it after `step start` and `step done` (when the (N+1)-th step
after a resume starts, or the task finishes); it finds the due resumes in the
log's index of key events (`store/log_index.py`) and reads the full events only
from the oldest due resume's before window on, so a step costs the same after ten
or ten thousand events when nothing is due. It is idempotent: a resume whose
event is logged is never recorded again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from git_agentckpt.errors import CkptError, UsageError
from git_agentckpt.metrics.resumes import METRICS_EVENT, resume_figures, totals
from git_agentckpt.metrics.timeline import STEP_START, ResumeSpan, find_resumes
from git_agentckpt.model import JSON, Event, NewEvent
from git_agentckpt.recovery.report import read_report
from git_agentckpt.store.log_index import key_events
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

DEFAULT_WINDOW = 10
MAX_WINDOW = 10_000

__all__ = ["DEFAULT_WINDOW", "METRICS_EVENT", "metrics", "record_due", "task_metrics"]


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


def _finished(ws: Workspace, task: TaskName) -> bool:
    try:
        return ws.state(task).get("status") == "done"
    except CkptError:
        return False


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


def _recorded(events: Sequence[Event]) -> set[str]:
    return {
        str(ev.data["report"])
        for ev in events
        if ev.type == METRICS_EVENT and isinstance(ev.data.get("report"), str)
    }


def _figures(
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
    spans = find_resumes(events, window, _finished(ws, task))
    resumes = _figures(ws, task, events, spans, window, _recorded(events))
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


def metrics(
    ws: Workspace, names: Sequence[str] = (), window: int = DEFAULT_WINDOW
) -> dict[str, JSON]:
    """The metrics of the tasks named (none: every task with an event log)."""
    check_window(window)
    started = time.perf_counter()
    tasks = [ws.require_task(n) for n in names] if names else ws.log.tasks()
    rows = [task_metrics(ws, t, window) for t in tasks]
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


def _tail_from(ws: Workspace, task: TaskName, first_id: str) -> list[Event]:
    """The events from `first_id` (an event of the log) to the tip, oldest first."""
    out: list[Event] = []
    for ev in ws.log.iter_back(task):
        out.append(ev)
        if ev.id == first_id:
            break
    out.reverse()
    return out


def record_due(ws: Workspace, task: TaskName, window: int = DEFAULT_WINDOW) -> list[Event]:
    """Log a `recovery.metrics` event for each resume whose window has passed and that has
    none yet (module doc); returns the events written."""
    key = key_events(ws.log, task)
    if not any(ev.type == "recovery.ready" for ev in key):
        return []
    finished = _finished(ws, task)
    recorded = _recorded(key)
    due = [s for s in find_resumes(key, window, finished) if s.passed]
    due = [s for s in due if s.report not in recorded]
    if not due:
        return []
    pos = min(s.before_start for s in due)
    events = [*key[:pos], *_tail_from(ws, task, key[pos].id)]
    spans = [
        s for s in find_resumes(events, window, finished) if s.report in {d.report for d in due}
    ]
    figures = _figures(ws, task, events, spans, window, {s.report for s in spans})
    new = [
        NewEvent(
            METRICS_EVENT,
            links={"checkpoint": f["resume_checkpoint"]}
            if isinstance(f.get("resume_checkpoint"), str)
            else {},
            data={
                "report": f["report"],
                "window": window,
                "figures": f,
                "message": f["verdict_line"],
            },
        )
        for f in figures
    ]
    return ws.log.append(task, new)
