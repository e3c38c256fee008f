"""Where each resume sits in a task's event log: its group, interruption and windows (pure).

A *resume* is one interruption recovered: the recovery reports written one after the
other with no step started between them (a resume that stopped for a person, then
the resume that went through), ending with a report whose outcome is `ready` or
`not_ready` (its `recovery.ready` event). A group whose reports all stopped, or a
`recovery.finished` (nothing to recover), is no resume.

Steps are counted by their `step.start` events (a started step is one *step
execution*; a refused start, `step.start_refused`, is none). The window of a step
runs from its `step.start` to the next `step.start`.

- The *after* window of a resume: from its `recovery.ready` up to (not including)
  the (N+1)-th `step.start` after it, or the next resume's first event, or the end
  of the log. It has *passed* when that (N+1)-th start is logged (`steps`), the next
  resume began (`next_resume`), or the task is finished (`task_finished`).
- The *interruption*: the earliest stop signal (a quota, a rate limit, an error:
  `model.is_stop_signal`) in the run of events before the resume that holds no
  work (`step.*`, `tool.call`, `model.call`); without one, the last event before
  the resume, not counting `session.start` and `user.prompt` (a new session's
  first events).
- The *before* window: the N step executions that started before the
  interruption, up to and including it (from the log's start when there were fewer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from git_agentckpt.model import Event, is_stop_signal

__all__ = ["ResumeSpan", "find_resumes", "step_starts"]

STEP_START = "step.start"
WORK_TYPES = ("step.start", "step.end", "tool.call", "model.call")
NEW_SESSION_TYPES = ("session.start", "user.prompt")


@dataclass
class ResumeSpan:
    """One resume, as positions in the event list it was found in (oldest first)."""

    reports: list[str]  # every report of the group, oldest first
    report: str  # the report of the resume that went through (the last ready one)
    first: int  # the group's first recovery event
    ready: int  # its (last) recovery.ready event
    interruption: int  # -1: nothing before the resume
    before_start: int  # first event of the before window
    after_end: int  # one past the after window's last event
    steps_after: int = 0
    steps_before: int = 0
    closed_by: str | None = None  # steps | next_resume | task_finished | None (open)
    reset: list[str] = field(default_factory=list)  # steps the resume reset to pending

    @property
    def passed(self) -> bool:
        return self.closed_by is not None


def _report_of(ev: Event) -> str | None:
    rid = ev.data.get("report")
    return rid if isinstance(rid, str) else None


def _groups(events: Sequence[Event]) -> list[ResumeSpan]:
    """Resume groups in log order (windows not yet set)."""
    out: list[ResumeSpan] = []
    current: ResumeSpan | None = None
    for i, ev in enumerate(events):
        if ev.type == STEP_START:
            current = None
        elif ev.type == "recovery.locate" and _report_of(ev):
            rid = str(_report_of(ev))
            if current is None:
                current = ResumeSpan([], "", i, -1, -1, 0, len(events))
            if rid not in current.reports:
                current.reports.append(rid)
        elif ev.type == "recovery.reset" and current is not None:
            steps = ev.data.get("steps_reset_to_pending")
            current.reset = (
                [s for s in steps if isinstance(s, str)] if isinstance(steps, list) else []
            )
        elif ev.type == "recovery.ready" and current is not None and _report_of(ev):
            if current.ready < 0:
                out.append(current)
            current.ready, current.report = i, str(_report_of(ev))
    return out


def _interruption(events: Sequence[Event], first: int) -> int:
    last = -1
    for i in range(first - 1, -1, -1):
        if events[i].type not in NEW_SESSION_TYPES:
            last = i
            break
    stop = -1
    for i in range(last, -1, -1):
        ev = events[i]
        if ev.type in WORK_TYPES:
            break
        if is_stop_signal(ev):
            stop = i
    return stop if stop >= 0 else last


def step_starts(events: Sequence[Event], lo: int, hi: int) -> list[int]:
    return [i for i in range(max(lo, 0), min(hi, len(events))) if events[i].type == STEP_START]


def find_resumes(events: Sequence[Event], window: int, finished: bool) -> list[ResumeSpan]:
    """Every resume of the log with its interruption and windows. `finished`: the task
    is finished now (its after window cannot grow)."""
    spans = _groups(events)
    for k, span in enumerate(spans):
        nxt = spans[k + 1].first if k + 1 < len(spans) else len(events)
        span.interruption = _interruption(events, span.first)
        before = step_starts(events, 0, span.interruption + 1)
        span.steps_before = min(window, len(before))
        span.before_start = before[-window] if len(before) >= window else 0
        after = step_starts(events, span.ready + 1, nxt)
        if len(after) > window:
            span.after_end, span.closed_by = after[window], "steps"
        else:
            span.after_end = nxt
            if nxt < len(events):
                span.closed_by = "next_resume"
            elif finished:
                span.closed_by = "task_finished"
        span.steps_after = min(window, len(after))
    return spans
