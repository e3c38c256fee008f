"""The drift alarm: signs in the event log that an agent silently lost its context.

Three signals; each new one is recorded as one `drift.suspected` event whose
`data` holds `signal`, `details` (one line), `evidence` (the ids of the events
that show it), `subject` (the constraint or step), `key` (what makes it
unique) and `recommendation`: `git ckpt resume --brief-only TASK`, the brief
a hook should inject into the agent's context again.

- `constraint_regressed`: a constraint whose status was `pass` at the task's
  previous `constraint.check` is `fail` now. Statuses are kept in the
  `constraint.check` event as `data.constraints` (`[{id, status}, ...]`);
  evidence: that previous check event.
- `step_redone`: a step that was done is started again, shown by either
  - a `step.start` event for a step that was `done` at that moment: the
    facade refuses `git ckpt step start` on a done step, so such an event was
    appended by someone else (`git ckpt event TASK --type step.start --json
    '{"step": "s1"}'`, an integration, another writer); or
  - a `step.start_refused` event (`data.status: "done"`): written by
    `raise_redo_alarm` when `git ckpt step start` refuses a done step, so
    that the attempt itself is evidence.
  A step is done at a moment when the note of the latest checkpoint committed
  before it (a `checkpoint.commit` event) says so, adjusted by the
  `task.start`, `step.start`, failed `step.end` and `state.update` events after
  that checkpoint. A resume commits a checkpoint whose note resets the redone
  steps to pending, so starting them again after a resume is no drift.
- `context_drop`: the context size the agent reports fell by more than a
  share (`context_drop`, default 0.5; `[drift] context_drop` in
  `.agent/ckpt.toml`) below its previous report. The size is read from any
  event, first found of `data.usage.context_tokens`, `data.context_tokens`,
  `output.usage.context_tokens` (`git ckpt event T --type model.call --json
  '{"usage": {"context_tokens": 81234}}'` stores it in `data.usage`).

Window: each scan reads only the events after the task's latest
`constraint.check` (all events when there is none). That check carries what
the next scan needs from before its window in `data.drift`
(`{"context_tokens": last report, "done_steps": [...]}`), so a check costs the
same after ten or ten thousand events.

No duplicates: once a check closed a window, its evidence is never scanned
again; and a signal whose `key` is already named by a `drift.suspected` event
in the window (recorded by `check_drift` between two checks) is not recorded
again. A regression fires once: the check that sees it records the
constraint as `fail`, so the next check does not see a `pass` before it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from git_agentckpt.errors import CkptError
from git_agentckpt.model import JSON, REFUSED_START_EVENT, Event, NewEvent
from git_agentckpt.store.checkpoints import CheckpointStore
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.refs import TaskName

__all__ = [
    "CHECK_EVENT",
    "DEFAULT_CONTEXT_DROP",
    "DRIFT_EVENT",
    "REFUSED_START_EVENT",
    "DriftScan",
    "DriftSignal",
    "check_drift",
    "context_tokens",
    "detect_drift",
    "drift_events",
    "raise_redo_alarm",
    "recommendation",
    "record_drift",
    "scan_drift",
]

CHECK_EVENT = "constraint.check"
DRIFT_EVENT = "drift.suspected"
DEFAULT_CONTEXT_DROP = 0.5


def recommendation(task: TaskName | str) -> str:
    """The command a hook runs to put the recovery brief back into the context."""
    return f"git ckpt resume --brief-only {shlex.quote(str(task))}"


@dataclass(frozen=True)
class DriftSignal:
    signal: str  # constraint_regressed | step_redone | context_drop
    details: str
    evidence: tuple[str, ...]  # event ids
    subject: str | None = None  # the constraint or step id
    extra: Mapping[str, JSON] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.signal}:{self.subject or ''}:{','.join(self.evidence)}"

    def to_json(self, task: TaskName | str | None = None) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "signal": self.signal,
            "details": self.details,
            "evidence": list(self.evidence),
            "subject": self.subject,
            "key": self.key,
        }
        if task is not None:
            out["recommendation"] = recommendation(task)
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class DriftScan:
    signals: tuple[DriftSignal, ...]  # new ones only (not yet recorded in the window)
    carry: dict[str, JSON]  # what the next `constraint.check` event stores in data.drift
    previous_check: str | None  # id of the check event that opened the window


def _number(value: object) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if value >= 0 else None


def context_tokens(event: Event) -> int | float | None:
    """The context size an event reports (see the module doc), or None."""
    usage = event.data.get("usage")
    if isinstance(usage, dict) and (found := _number(usage.get("context_tokens"))) is not None:
        return found
    if (found := _number(event.data.get("context_tokens"))) is not None:
        return found
    output = event.output
    if isinstance(output, dict) and isinstance(output.get("usage"), dict):
        return _number(output["usage"].get("context_tokens"))
    return None


def _done_in(state: object) -> set[str]:
    steps = state.get("steps") if isinstance(state, dict) else None
    if not isinstance(steps, list):
        return set()
    return {
        str(s["id"])
        for s in steps
        if isinstance(s, dict) and isinstance(s.get("id"), str) and s.get("status") == "done"
    }


class _DoneSteps:
    """The done steps as the window is replayed; checkpoint notes are read lazily."""

    def __init__(self, store: CheckpointStore, done: Iterable[str]) -> None:
        self.store = store
        self._done = set(done)
        self._commit: str | None = None  # a checkpoint whose note is not read yet
        self._later: list[tuple[str, bool]] = []  # (step, done) after that checkpoint

    def checkpoint(self, commit: str) -> None:
        self._commit, self._later = commit, []

    def reset(self, done: set[str]) -> None:
        self._done, self._commit, self._later = set(done), None, []

    def mark(self, step: str, done: bool) -> None:
        if self._commit is not None:
            self._later.append((step, done))
        elif done:
            self._done.add(step)
        else:
            self._done.discard(step)

    def patch(self, patch: object) -> None:
        steps = patch.get("steps") if isinstance(patch, dict) else None
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict) and isinstance(step.get("id"), str) and "status" in step:
                self.mark(step["id"], step["status"] == "done")

    def done(self) -> set[str]:
        if self._commit is not None:
            try:
                note = self.store.state_note(self._commit)
            except CkptError:  # unreadable note: keep what we knew before it
                note = None
            if note is not None:
                self._done = _done_in(note)
            self._commit = None
            for step, done in self._later:
                self.mark(step, done)
            self._later = []
        return self._done


def _window(log: EventLog, task: TaskName) -> tuple[list[Event], Event | None]:
    """Events after the latest `constraint.check` (oldest first), and that check."""
    window: list[Event] = []
    for ev in log.iter_back(task):
        if ev.type == CHECK_EVENT:
            window.reverse()
            return window, ev
        window.append(ev)
    window.reverse()
    return window, None


def _regressions(previous: Event, current: Mapping[str, str]) -> list[DriftSignal]:
    items = previous.data.get("constraints")
    before = {
        item.get("id"): item.get("status")
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict)
    }
    return [
        DriftSignal(
            "constraint_regressed",
            f"constraint {cid} held at the previous check (#{previous.seq}) and fails now",
            (previous.id,),
            cid,
        )
        for cid, status in current.items()
        if before.get(cid) == "pass" and status == "fail"
    ]


def _was_done(ev: Event) -> bool:
    return ev.data.get("status") == "done"


def _step_signal(ev: Event, step: str, refused: bool) -> DriftSignal:
    how = "was refused a new start" if refused else "was started again"
    return DriftSignal(
        "step_redone",
        f"step {step} is done but {how} (event #{ev.seq}, {ev.type})",
        (ev.id,),
        step,
    )


def scan_drift(
    log: EventLog,
    task: TaskName,
    *,
    current: Mapping[str, str] | None = None,
    context_drop: float = DEFAULT_CONTEXT_DROP,
    store: CheckpointStore | None = None,
) -> DriftScan:
    """Scan the window (see the module doc). `current`: constraint id -> status now."""
    if not 0 < context_drop < 1:
        raise ValueError("context_drop must be a share between 0 and 1")
    window, previous = _window(log, task)
    carry_in = previous.data.get("drift") if previous is not None else None
    carry_in = carry_in if isinstance(carry_in, dict) else {}
    last_tokens = _number(carry_in.get("context_tokens"))
    done_in = carry_in.get("done_steps")
    steps = _DoneSteps(
        store or CheckpointStore(log.repo, log),
        [s for s in done_in if isinstance(s, str)] if isinstance(done_in, list) else [],
    )
    signals = _regressions(previous, current) if previous is not None and current else []
    for ev in window:
        step = ev.links.get("step")
        if ev.type == "task.start":
            steps.reset(_done_in(ev.data.get("state")))
        elif ev.type == "checkpoint.commit" and isinstance(ev.links.get("checkpoint"), str):
            steps.checkpoint(str(ev.links["checkpoint"]))
        elif ev.type == "state.update":
            steps.patch(ev.data.get("patch"))
        elif ev.type == "step.start" and isinstance(step, str):
            if step in steps.done():
                signals.append(_step_signal(ev, step, refused=False))
            steps.mark(step, False)
        elif ev.type == "step.end" and isinstance(step, str) and ev.data.get("status") == "failed":
            steps.mark(step, False)
        elif ev.type == REFUSED_START_EVENT and isinstance(step, str) and _was_done(ev):
            signals.append(_step_signal(ev, step, refused=True))
        tokens = context_tokens(ev)
        if tokens is None:
            continue
        if last_tokens and tokens < last_tokens * (1 - context_drop):
            share = 1 - tokens / last_tokens
            signals.append(
                DriftSignal(
                    "context_drop",
                    f"the reported context fell from {last_tokens:g} to {tokens:g} tokens "
                    f"({share:.0%}) at event #{ev.seq} ({ev.type})",
                    (ev.id,),
                    None,
                    {"previous": last_tokens, "current": tokens},
                )
            )
        last_tokens = tokens
    known = {ev.data.get("key") for ev in window if ev.type == DRIFT_EVENT}
    new: list[DriftSignal] = []
    for sig in signals:
        if sig.key not in known:
            known.add(sig.key)
            new.append(sig)
    carry: dict[str, JSON] = {"context_tokens": last_tokens, "done_steps": sorted(steps.done())}
    return DriftScan(tuple(new), carry, previous.id if previous is not None else None)


def detect_drift(
    log: EventLog,
    task: TaskName,
    *,
    current: Mapping[str, str] | None = None,
    context_drop: float = DEFAULT_CONTEXT_DROP,
    store: CheckpointStore | None = None,
) -> list[DriftSignal]:
    """The new drift signals of the task (not yet recorded); nothing is written."""
    scan = scan_drift(log, task, current=current, context_drop=context_drop, store=store)
    return list(scan.signals)


def drift_events(task: TaskName, signals: Sequence[DriftSignal]) -> list[NewEvent]:
    """One `drift.suspected` event per signal (to append in a batch with others)."""
    out: list[NewEvent] = []
    for sig in signals:
        links: dict[str, JSON] = {"step": sig.subject} if sig.signal == "step_redone" else {}
        data = {**sig.to_json(task), "message": f"{sig.signal}: {sig.details}"}
        out.append(NewEvent(DRIFT_EVENT, links=links, data=data))
    return out


def record_drift(log: EventLog, task: TaskName, signals: Sequence[DriftSignal]) -> list[Event]:
    """Append the `drift.suspected` events of `signals` in one commit."""
    return log.append(task, drift_events(task, signals)) if signals else []


def check_drift(
    log: EventLog, task: TaskName, *, context_drop: float = DEFAULT_CONTEXT_DROP
) -> list[Event]:
    """Detect and record drift outside `git ckpt check` (steps and context size only)."""
    return record_drift(log, task, detect_drift(log, task, context_drop=context_drop))


def raise_redo_alarm(log: EventLog, task: TaskName) -> list[Event]:
    """After `step start` refused a done step (its `step.start_refused` is logged): raise
    the alarm at once (step signals only: context drops wait for `check`, which knows
    the configured share). Returns the events written."""
    found = [s for s in detect_drift(log, task) if s.signal == "step_redone"]
    return record_drift(log, task, found)
