"""The `recovery.metrics` events: a resume's figures added to its report once its window
has passed (nothing is rewritten).

`record_due` writes, for each resume whose after window has passed and that has no
`recovery.metrics` event yet, one `recovery.metrics` event (a tool-only type: the
`recovery` namespace; `data.report`, `data.window`, `data.figures`) with its figures at
the default window. The facade calls it after `step start` and `step done` (when the
(N+1)-th step after a resume starts, a later resume began, or the task finished). It
finds the due resumes in the log's index of key events (`store/log_index.py`) and reads
the full events only from the oldest due resume's before window on, so a step costs
the same after ten or ten thousand events when nothing is due (and this module
imports only the timeline until something is). It is idempotent: a resume whose
event is logged is never recorded again.
"""

from __future__ import annotations

from collections.abc import Sequence

from git_agentckpt.errors import CkptError
from git_agentckpt.metrics.timeline import find_resumes
from git_agentckpt.model import Event, NewEvent
from git_agentckpt.store.log_index import key_events
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

DEFAULT_WINDOW = 10
METRICS_EVENT = "recovery.metrics"

__all__ = ["DEFAULT_WINDOW", "METRICS_EVENT", "record_due", "reports", "task_finished"]


def reports(events: Sequence[Event], type_: str) -> set[str]:
    """The reports events of `type_` name (`data.report`, and `data.reports`: a
    `recovery.metrics` event names every report of its resume)."""
    out: set[str] = set()
    for ev in events:
        if ev.type != type_:
            continue
        many = ev.data.get("reports")
        named = [ev.data.get("report"), *(many if isinstance(many, list) else [])]
        out.update(r for r in named if isinstance(r, str))
    return out


def task_finished(ws: Workspace, task: TaskName) -> bool:
    try:
        return ws.state(task).get("status") == "done"
    except CkptError:
        return False


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
    recorded = reports(key, METRICS_EVENT)
    if not reports(key, "recovery.ready") - recorded:
        return []  # the common case: no resume, or every one recorded
    finished = task_finished(ws, task)
    due = [s for s in find_resumes(key, window, finished) if s.passed]
    due = [s for s in due if s.report not in recorded]
    if not due:
        return []
    pos = min(s.before_start for s in due)
    events = [*key[:pos], *_tail_from(ws, task, key[pos].id)]
    spans = [
        s for s in find_resumes(events, window, finished) if s.report in {d.report for d in due}
    ]
    from git_agentckpt.metrics.compute import figures_of  # only when one is due

    figures = figures_of(ws, task, events, spans, window, {s.report for s in spans})
    new = [
        NewEvent(
            METRICS_EVENT,
            links={"checkpoint": f["resume_checkpoint"]}
            if isinstance(f.get("resume_checkpoint"), str)
            else {},
            data={
                "report": f["report"],
                "reports": f["reports"],
                "window": window,
                "figures": f,
                "message": f["verdict_line"],
            },
        )
        for f in figures
    ]
    return ws.log.append(task, new)
