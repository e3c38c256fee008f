"""The data of a task's timeline for people (`git ckpt timeline TASK --html FILE`).

One pass over the event log as it streams (store/log_stream.py: constant memory
per event) turns the trail into marks on one time axis, each naming the commit that
proves it:
- checkpoints (`checkpoint.commit`, plus any checkpoint of the chain the log does
  not name, at its commit time): the checkpoint commit, shown by `git ckpt show ID`;
- steps: a span from each `step.start` to its `step.end` (failed, done, or open
  when it never ended), linked to the step-end checkpoint or the event commit;
- constraint checks (pass or fail, with the failing ids), drift alarms, resumes
  (from `recovery.locate` to `recovery.ready|stopped|finished`, with the outcome and
  the workspace drift found) and confirmations (`recovery.confirmed|rejected`);
- the agent's own events (tool and model calls, …): each one while there are at
  most `INDIVIDUAL_LIMIT`, else counted in buckets (a minute, coarser on a long
  task) with counts per type, a bucket of few events still shown one by one.
Nothing here formats HTML: `audit/timeline_html.py` renders (and escapes) the data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from git_agentckpt.model import JSON, is_tool_only, iso_now
from git_agentckpt.store.log_filter import compact, details_line
from git_agentckpt.store.reading import TaskReader

INDIVIDUAL_LIMIT = 200  # agent events drawn one by one up to this many in all
SAMPLES = 3  # a bucket with at most this many events shows them one by one
MAX_BUCKETS = 240  # buckets on the axis at most (a minute each, coarser if needed)
BUCKET_SIZES = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86400)
LANES = ("checkpoints", "steps", "checks", "alarms", "resumes", "events")


@dataclass
class Mark:
    """One item on the axis: a point (`end` None) or a span."""

    lane: str  # one of LANES
    kind: str  # checkpoint | step | check | drift | resume | confirm | event | bucket
    start: float  # seconds since the epoch
    ts: str  # `start` as the log writes it
    label: str  # short text, shown on the axis when it fits
    status: str = ""  # done | failed | open | pass | fail | ready | needs_person | …
    commit: str = ""  # the full id of the commit it links to
    show: str = ""  # the command that shows that commit
    detail: str = ""  # one or two lines for the list and the tooltip
    end: float | None = None
    count: int = 1
    types: dict[str, int] = field(default_factory=dict)  # buckets: events per type


@dataclass
class Timeline:
    task: str
    goal: str
    status: str
    marks: list[Mark]
    counts: dict[str, int]  # what the summary header counts
    start: float
    end: float
    first_ts: str
    last_ts: str
    bucket_seconds: int  # 0: every agent event is drawn alone


def seconds(ts: str) -> float:
    """The log's `2026-11-30T16:27:31.123Z` as seconds since the epoch (0 if unreadable)."""
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _d(obj: Mapping[str, JSON], key: str) -> dict[str, JSON]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _s(value: JSON) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class _Bucket:
    start: float
    ts: str
    count: int = 0
    types: dict[str, int] = field(default_factory=dict)
    samples: list[Mark] = field(default_factory=list)
    first_commit: str = ""


class _Builder:
    def __init__(self, task: str) -> None:
        self.task = task
        self.marks: list[Mark] = []
        self.counts: dict[str, int] = {k: 0 for k in ("events", "tool calls", "model calls")}
        self.open_steps: dict[str, Mark] = {}
        self.ended: dict[str, Mark] = {}  # steps whose step-end checkpoint is awaited
        self.resume: Mark | None = None
        self.seen_ckpts: set[str] = set()
        self.buckets: dict[int, _Bucket] = {}
        self.individual: list[Mark] | None = []
        self.first_ts = self.last_ts = ""
        self.start = self.end = 0.0

    def add(self, obj: Mapping[str, JSON], commit: str) -> None:
        ts = _s(obj.get("ts"))
        at = seconds(ts)
        if at and (not self.start or at < self.start):
            self.start, self.first_ts = at, ts
        if at and at >= self.end:
            self.end, self.last_ts = at, ts
        self.counts["events"] += 1
        type_ = _s(obj.get("type"))
        handler = _HANDLERS.get(type_)
        if handler is not None:
            handler(self, obj, commit, at, ts)
        elif not is_tool_only(type_):
            self._work(obj, commit, at, ts, type_)

    def _show_event(self, commit: str) -> str:
        return f"git show {commit}"

    def _work(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str, type_: str) -> None:
        if type_ == "tool.call":
            self.counts["tool calls"] += 1
        elif type_ == "model.call":
            self.counts["model calls"] += 1
        links = _d(obj, "links")
        who = _s(_d(obj, "actor").get("agent"))
        head = type_ + (f" step={_s(links.get('step'))}" if links.get("step") else "")
        head += f" by {who}" if who else ""
        mark = Mark(
            "events",
            "event",
            at,
            ts,
            compact(type_, 40),
            commit=commit,
            show=self._show_event(commit),
            detail=compact(head, 120) + ("\n" + details_line(obj) if details_line(obj) else ""),
        )
        if self.individual is not None:
            self.individual.append(mark)
            if len(self.individual) > INDIVIDUAL_LIMIT:
                self.individual = None
        key = int(at // 60)
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = _Bucket(key * 60.0, ts, first_commit=commit)
        b.count += 1
        b.types[type_] = b.types.get(type_, 0) + 1
        if len(b.samples) < SAMPLES:
            b.samples.append(mark)

    def checkpoint(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        links, data = _d(obj, "links"), _d(obj, "data")
        target = _s(links.get("checkpoint"))
        if not target or target in self.seen_ckpts:
            return
        self.seen_ckpts.add(target)
        cid = _s(data.get("id")) or target[:12]
        trigger, kind, step = _s(data.get("trigger")), _s(data.get("kind")), _s(links.get("step"))
        number = data.get("number")
        label = f"#{number}" if isinstance(number, int) else cid[:8]
        what = f"checkpoint {label} ({kind or 'full'}, trigger {trigger or '-'})"
        what += f", step {step}" if step else ""
        self.marks.append(
            Mark(
                "checkpoints",
                "checkpoint",
                at,
                ts,
                label,
                kind or "full",
                target,
                f"git ckpt show {cid}",
                f"{what}\nid {cid}",
            )
        )
        if trigger == "step_end" and step in self.ended:
            span = self.ended.pop(step)
            span.status, span.commit, span.show = "done", target, f"git ckpt show {cid}"

    def step_start(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        step = _s(_d(obj, "links").get("step"))
        mode = _s(_d(obj, "data").get("mode"))
        span = Mark("steps", "step", at, ts, step, "open", commit, self._show_event(commit))
        span.detail = f"step {step}" + (f" ({mode})" if mode and mode != "start" else "")
        self.open_steps[step] = span
        self.marks.append(span)

    def step_end(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        step = _s(_d(obj, "links").get("step"))
        data = _d(obj, "data")
        status = _s(data.get("status")) or "done"
        span = self.open_steps.pop(step, None)
        if span is None:  # an end with no start in this log: a point-long span
            span = Mark("steps", "step", at, ts, step, "", commit, self._show_event(commit))
            span.detail = f"step {step}"
            self.marks.append(span)
        span.end = at
        outputs = data.get("outputs")
        if outputs is not None:
            span.detail += "\nout: " + compact(outputs)
        if status == "failed":
            span.status, span.commit, span.show = "failed", commit, self._show_event(commit)
        else:  # done once its step-end checkpoint commits (`checkpoint`)
            span.status = "ended"
            span.commit, span.show = commit, self._show_event(commit)
            self.ended[step] = span

    def check(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        data = _d(obj, "data")
        rows = data.get("constraints")
        failing = [
            f"{_s(r.get('id'))}: {_s(r.get('status'))}"
            for r in (rows if isinstance(rows, list) else [])
            if isinstance(r, dict) and r.get("status") in ("fail", "error")
        ]
        status = "fail" if failing else "pass"
        message = _s(data.get("message"))
        detail = "constraint check: " + compact(message or status, 120)
        if failing:
            detail += "\nfailing: " + compact(", ".join(failing), 120)
        label = "FAIL" if failing else "pass"
        self.marks.append(
            Mark("checks", "check", at, ts, label, status, commit, self._show_event(commit), detail)
        )

    def drift(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        data = _d(obj, "data")
        signal, subject = _s(data.get("signal")), _s(data.get("subject"))
        detail = f"drift alarm: {signal}" + (f" ({subject})" if subject else "")
        details = _s(data.get("details"))
        if details:
            detail += "\n" + compact(details, 120)
        label = compact(f"{signal} {subject}".strip(), 40)
        self.marks.append(
            Mark(
                "alarms", "drift", at, ts, label, "alarm", commit, self._show_event(commit), detail
            )
        )

    def resume_start(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        start = _s(_d(obj, "links").get("checkpoint"))
        mark = Mark("resumes", "resume", at, ts, "resume", "running", commit)
        mark.show = self._show_event(commit)
        mark.detail = f"resume from checkpoint {start[:12]}" if start else "resume"
        self.resume = mark
        self.marks.append(mark)

    def resume_verify(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        data = _d(obj, "data")
        drift = data.get("source_drift")
        if self.resume is None or not isinstance(drift, list) or not drift:
            return
        paths = [
            f"{_s(d.get('path'))} {_s(d.get('change'))}".strip()
            for d in drift
            if isinstance(d, dict)
        ]
        self.resume.detail += "\nworkspace drift: " + compact(", ".join(paths), 120)
        self.resume.label = "resume, drift"

    def resume_end(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        type_ = _s(obj.get("type"))
        data = _d(obj, "data")
        outcome = {"recovery.ready": "ready", "recovery.finished": "finished"}.get(type_)
        outcome = outcome or _s(data.get("outcome")) or "stopped"
        mark = self.resume
        if mark is None:
            mark = Mark("resumes", "resume", at, ts, "resume", "", commit, self._show_event(commit))
            mark.detail = "resume"
            self.marks.append(mark)
        self.resume = None
        mark.end, mark.status = at, outcome
        mark.label = f"{mark.label}: {outcome}"
        mark.detail += f"\noutcome: {outcome}"
        message, made = _s(data.get("message")), _s(_d(obj, "links").get("checkpoint"))
        if message:
            mark.detail += " - " + compact(message, 100)
        if made:  # the resume checkpoint
            mark.commit, mark.show = made, f"git ckpt show {made[:12]}"
        else:
            mark.commit, mark.show = commit, self._show_event(commit)

    def confirm(self, obj: Mapping[str, JSON], commit: str, at: float, ts: str) -> None:
        data = _d(obj, "data")
        ok = _s(obj.get("type")) == "recovery.confirmed"
        by = _s(data.get("by")) or "checker"
        status = "confirmed" if ok else "rejected"
        detail = f"restatement {status} by the {by}"
        problems = data.get("problems")
        if isinstance(problems, list) and problems:
            detail += "\n" + compact("; ".join(str(p) for p in problems), 120)
        self.marks.append(
            Mark(
                "resumes",
                "confirm",
                at,
                ts,
                status,
                status,
                commit,
                self._show_event(commit),
                detail,
            )
        )

    def add_missing_checkpoints(self, rows: Iterable[tuple[str, str, int, str, str, int]]) -> None:
        """Checkpoints of the chain that no `checkpoint.commit` event names."""
        for cid, commit, when, trigger, kind, number in rows:
            if commit in self.seen_ckpts:
                continue
            ts = iso_now(float(when))
            self.seen_ckpts.add(commit)
            self.marks.append(
                Mark(
                    "checkpoints",
                    "checkpoint",
                    float(when),
                    ts,
                    f"#{number}",
                    kind,
                    commit,
                    f"git ckpt show {cid}",
                    f"checkpoint #{number} ({kind}, trigger {trigger}; not in the event log)"
                    f"\nid {cid}",
                )
            )

    def event_marks(self) -> tuple[list[Mark], int]:
        """The agent's events: each one, or buckets (and their width in seconds)."""
        if self.individual is not None:
            return list(self.individual), 0
        size = next(
            (s for s in BUCKET_SIZES if len({k * 60 // s for k in self.buckets}) <= MAX_BUCKETS),
            BUCKET_SIZES[-1],
        )
        merged: dict[int, _Bucket] = {}
        for key in sorted(self.buckets):
            b = self.buckets[key]
            k = int(b.start // size)
            m = merged.get(k)
            if m is None:
                merged[k] = m = _Bucket(
                    k * float(size), iso_now(k * float(size)), first_commit=b.first_commit
                )
            m.count += b.count
            for t, n in b.types.items():
                m.types[t] = m.types.get(t, 0) + n
            m.samples.extend(b.samples[: max(0, SAMPLES - len(m.samples))])
        out: list[Mark] = []
        for m in merged.values():
            if m.count <= SAMPLES:
                out.extend(m.samples)
                continue
            per = ", ".join(f"{n} {t}" for t, n in sorted(m.types.items(), key=lambda x: -x[1]))
            out.append(
                Mark(
                    "events",
                    "bucket",
                    m.start,
                    m.ts,
                    str(m.count),
                    "",
                    m.first_commit,
                    f"git ckpt log {self.task} --since {m.ts}",
                    f"{m.count} events in {size // 60} min: {per}",
                    end=m.start + size,
                    count=m.count,
                    types=m.types,
                )
            )
        return out, size


_HANDLERS = {
    "checkpoint.commit": _Builder.checkpoint,
    "step.start": _Builder.step_start,
    "step.end": _Builder.step_end,
    "constraint.check": _Builder.check,
    "drift.suspected": _Builder.drift,
    "recovery.locate": _Builder.resume_start,
    "recovery.verify": _Builder.resume_verify,
    "recovery.ready": _Builder.resume_end,
    "recovery.stopped": _Builder.resume_end,
    "recovery.finished": _Builder.resume_end,
    "recovery.confirmed": _Builder.confirm,
    "recovery.rejected": _Builder.confirm,
}


def build_timeline(reader: TaskReader, task: str) -> Timeline:
    """The timeline of `task` (the log streamed once; the checkpoint chain for any
    checkpoint the log does not name)."""
    state = reader.state(task)
    b = _Builder(task)
    for entry in reader.log_entries(task):
        b.add(entry.obj, entry.commit)
    b.add_missing_checkpoints(
        (c.id, c.commit, c.time, c.trigger, c.kind, c.number) for c in reader.checkpoints(task)
    )
    for span in b.ended.values():  # a step.end whose checkpoint never committed
        span.status = "unfinished"
        span.detail += "\nits step-end checkpoint never committed: the step is redone"
    events, size = b.event_marks()
    marks = sorted(b.marks + events, key=lambda m: (m.start, LANES.index(m.lane)))
    end = max([b.end, *(m.end or m.start for m in marks)]) if marks else b.end
    for m in marks:
        if m.kind == "step" and m.end is None:
            m.end = end  # still open at the end of the log
    counts = _counts(b, marks)
    return Timeline(
        task,
        _s(state.get("goal")),
        _s(state.get("status")),
        marks,
        counts,
        b.start or (marks[0].start if marks else 0.0),
        end,
        b.first_ts,
        b.last_ts,
        size,
    )


def _counts(b: _Builder, marks: list[Mark]) -> dict[str, int]:
    def n(kind: str, *status: str) -> int:
        return sum(1 for m in marks if m.kind == kind and (not status or m.status in status))

    return {
        "events": b.counts["events"],
        "tool calls": b.counts["tool calls"],
        "model calls": b.counts["model calls"],
        "checkpoints": n("checkpoint"),
        "step runs": n("step"),
        "steps done": n("step", "done"),
        "steps failed": n("step", "failed"),
        "checks": n("check"),
        "checks failed": n("check", "fail"),
        "drift alarms": n("drift"),
        "resumes": n("resume"),
        "confirmations": n("confirm", "confirmed"),
        "rejections": n("confirm", "rejected"),
    }


__all__ = ["LANES", "Mark", "Timeline", "build_timeline", "seconds"]
