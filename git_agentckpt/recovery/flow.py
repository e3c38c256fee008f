"""`git ckpt resume`: the five steps, in order, with a report (`confirm`: confirming.py).

1. locate the starting checkpoint;  2. verify the workspace (restore, accept or
stop);  3. check the assertions (accept, controlled rollback, or stop) and run
the constraints;  4. build the recovery brief;  5. the resume checkpoint: the
task is `recovering` until `confirm` accepts the agent's restatement.

Each step is a function that returns a record of what it found *and did*
(`Located`, `VerifyStep`, `AssertionStep`, the constraint report); the brief,
the report and the `--json` output are all built from those records, so what
is reported is what happened. Every resume stores a report in
`refs/agent/reports/<task>`.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path

from git_agentckpt.contracts.checks import CheckResult
from git_agentckpt.contracts.engine import evaluate_for_resume, make_command_runner
from git_agentckpt.contracts.schema import Check, Contract, load_contract_dir
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import Exit, NotFound, UsageError
from git_agentckpt.git.worktree import snapshot_tree
from git_agentckpt.lifecycle import ASSERTIONS, CONSTRAINTS, DRIFT
from git_agentckpt.model import JSON, REFUSED_START_EVENT, Event, NewEvent, iso_now, new_ulid
from git_agentckpt.progress import Progress
from git_agentckpt.recovery.assertions import AssertionStep, CommandRunner, assertions_step
from git_agentckpt.recovery.bound_notes import BoundNotes, prepared_notes
from git_agentckpt.recovery.brief import Brief, Facts, build_brief
from git_agentckpt.recovery.context import (
    budget,
    contract_context,
    work_events,
)
from git_agentckpt.recovery.locate import RESUME_TRIGGER, Located, locate
from git_agentckpt.recovery.report import report_files, report_write
from git_agentckpt.recovery.verify import Verification, VerifyStep, ensure_tree, verify_step
from git_agentckpt.settings import CONTRACTS_DIR
from git_agentckpt.store.checkpoints import Checkpoint, Compute, Extra
from git_agentckpt.store.evidence import unsupported_claims, without_suspect_claims
from git_agentckpt.store.log_index import last_own_events, read_index, writes_deferred
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import TaskView, read_task
from git_agentckpt.store.workspace import Resumed, Workspace, checked_moves


@dataclass
class ResumeOptions:
    from_checkpoint: str | None = None
    restore: bool = False
    accept_drift: bool = False
    no_rollback: bool = False
    brief_only: bool = False
    max_brief_tokens: int | None = None
    n_events: int = 10


@dataclass
class ResumeOutcome:
    exit: Exit
    outcome: str  # ready | not_ready | finished | needs_person | assertions_failed | brief
    message: str
    report: dict[str, JSON] = field(default_factory=dict)
    brief: Brief | None = None

    def to_json(self) -> dict[str, JSON]:
        out = dict(self.report)
        out.update({"outcome": self.outcome, "exit": int(self.exit), "message": self.message})
        if self.brief is not None:
            out["brief"] = self.brief.data
            out["brief_markdown"] = self.brief.markdown
            out["brief_tokens"] = self.brief.tokens
        return out


def load_contract(ck: Workspace) -> Contract | None:
    """Parse errors propagate: resume never quietly runs without its constraints."""
    return load_contract_dir(Path(ck.repo.workdir) / CONTRACTS_DIR)


def _runner(s: _Session) -> CommandRunner:
    """Trusted commands run in the working tree; the session notes that one ran (it may
    have written files: the resume checkpoint then snapshots instead of reusing)."""
    run = make_command_runner(s.ws.repo, TrustStore(), s.ws.log.redactor.text)

    def counted(check: Check) -> CheckResult:
        result = run(check)
        if result.status != "untrusted":
            s.commands_ran = True
        return result

    return counted


def _finished(state: dict[str, JSON]) -> bool:
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    if state.get("status") == "done":
        return True
    return bool(steps) and all(s.get("status") in ("done", "skipped") for s in steps)


@dataclass
class _Session:
    """One resume: what it read, what it recorded so far, and how long each step took."""

    ws: Workspace
    task: TaskName
    opts: ResumeOptions
    view: TaskView
    state_now: dict[str, JSON]  # the current state, minus claims the history does not back
    not_trusted: list[str]
    contract: Contract | None
    events: list[Event]
    last_stop: Event | None  # the last stop signal in the log (the index keeps where)
    report: dict[str, JSON]
    pending: list[NewEvent] = field(default_factory=list)  # logged with the report
    commands_ran: bool = False  # a trusted command of an assertion or constraint ran
    timings: dict[str, float] = field(default_factory=dict)
    _t: float = field(default_factory=time.perf_counter)

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round(now - self._t, 4)
        self._t = now

    @property
    def report_id(self) -> str:
        return str(self.report["id"])

    def facts(self, state: dict[str, JSON], mode: str, start_tree: str | None) -> Facts:
        return Facts(
            state=state,
            contract=contract_context(self.ws.repo, self.contract, start_tree),
            budget=budget(state.get("usage") or {}, self.last_stop),
            mode=mode,
            work=work_events(
                last_own_events(self.ws.log, self.task, self.opts.n_events), self.opts.n_events
            ),
            not_trusted=list(self.not_trusted),
            redo_attempts=_redo_attempts(self.view, self.events),
        )


def _redo_attempts(view: TaskView, events: list[Event]) -> list[str]:
    """Starts of done steps since the last checkpoint: a drift signal, never a plan."""
    out = [
        f"event #{s.seq}: step.start of a done step (it stays done)"
        for s in view.skipped
        if s.type == "step.start" and " is done: " in s.reason
    ]
    since = view.tip.commit if view.tip else None
    first = 0  # after the tip's prepare, found from the end (a long log holds ~1,000)
    if since is not None:
        first = len(events)
        for i in range(len(events) - 1, -1, -1):
            ev = events[i]
            if ev.type == "checkpoint.prepare" and ev.links.get("checkpoint") == since:
                first = i + 1
                break
    for ev in events[first:]:
        if ev.type == REFUSED_START_EVENT and ev.data.get("status") == "done":
            out.append(f"event #{ev.seq}: `step start {ev.links.get('step')}` refused: it is done")
    return out


def _open(ws: Workspace, task_name: str, opts: ResumeOptions) -> _Session:
    task = TaskName(task_name)
    view = read_task(ws.store, ws.log, task)
    if view.state is None:
        raise NotFound(f"no task {task_name!r}", hint="see `git ckpt task list`")
    ws.require_own(task)
    # a claim the history does not back (a forged or copied note) is reported, never trusted
    suspects = unsupported_claims(ws.store, task, view.state, view.tip)
    report: dict[str, JSON] = {"v": 1, "id": new_ulid(), "task": task.name, "started": iso_now()}
    index = read_index(ws.log, task)  # the key events, indexed (store/log_index.py)
    if suspects or view.skipped:
        report["suspect_state"] = [c.to_json() for c in suspects]
        report["skipped_events"] = [e.to_json() for e in view.skipped]
    return _Session(
        ws,
        task,
        opts,
        view,
        without_suspect_claims(view.state, suspects),
        [c.one_line() for c in suspects] + [e.one_line() for e in view.skipped],
        load_contract(ws),
        list(index.events) if index else [],
        index.stop if index else None,
        report,
    )


def resume(ws: Workspace, task_name: str, opts: ResumeOptions) -> ResumeOutcome:
    """The five steps. The key-event index is read three times as the log grows, and
    written once, at the end (`log_index.writes_deferred`)."""
    with writes_deferred():
        return _resume(ws, task_name, opts)


def _resume(ws: Workspace, task_name: str, opts: ResumeOptions) -> ResumeOutcome:
    s = _open(ws, task_name, opts)
    if opts.brief_only:
        brief = build_brief(
            s.facts(s.state_now, "brief only", s.view.tip.tree if s.view.tip else None),
            max_tokens=opts.max_brief_tokens,
        )
        message = "brief only: nothing was changed"
        return ResumeOutcome(Exit.OK, "brief", message, {"task": s.task.name}, brief)
    if _finished(s.state_now):
        return _finish(s)
    with Progress("Resuming", 5) as meter:  # the five steps, on stderr when it runs long
        return _five_steps(s, meter)


def _five_steps(s: _Session, meter: Progress) -> ResumeOutcome:
    ws, opts = s.ws, s.opts
    located = locate_step(s)
    meter.advance()
    start, effective = located.start, located.effective
    assert start is not None and effective is not None
    verified = verify_step(ws, effective, restore=opts.restore, accept_drift=opts.accept_drift)
    _record_verify(s, verified)
    meter.advance()
    if verified.needs_person:
        return _stop(s, Exit.NEEDS_PERSON, verified.stop_message(start.id))
    asserted = _assertions(s, start, verified, located)
    meter.advance()
    if asserted.stopped:
        return _stop(s, Exit.ASSERTIONS_FAILED, f"assertions fail: {asserted.stopped}")
    # the working tree as a tree: proven equal to the checkpoint by verification (no
    # snapshot), or snapshotted once after the last write (drift accepted, regenerable
    # files settled, a restore, a rollback); the resume checkpoint records that same tree
    tree = ensure_tree(ws.repo, verified.final, ws.settings.secret_paths)
    if asserted.rollback is not None and asserted.rollback.target is not None:
        start = effective = asserted.rollback.target
        tree = snapshot_tree(ws.repo, ws.settings.secret_paths)  # the tree rolled back to
    failing = _constraints(s, tree)
    meter.advance()
    outcome = _ready(s, located, start, verified, asserted, failing, tree)
    meter.advance()
    return outcome


def locate_step(s: _Session) -> Located:
    """Step 1: the starting checkpoint (`--from` names one)."""
    located = locate(s.ws.store, s.ws.log, s.task, roll_forward=True)
    if s.opts.from_checkpoint:
        chosen = s.ws.resolve(s.opts.from_checkpoint)
        if chosen.task != s.task.name:
            raise UsageError(f"checkpoint {chosen.id} belongs to task {chosen.task}, not {s.task}")
        located = Located(
            chosen,
            chosen,
            "named with --from",
            located.open_steps,
            [],
            located.rolled_forward,
            located.aborted,
            located.mid_step,
            located.elsewhere,
        )
    if located.start is None or located.effective is None:
        raise NotFound(
            f"task {s.task} has no complete checkpoint to resume from",
            hint=f"take one with `git ckpt create -t {s.task}`",
        )
    s.report["locate"] = located.to_json()
    s.pending.append(
        NewEvent(
            "recovery.locate",
            links={"checkpoint": located.start.commit},
            data={"report": s.report_id, **located.to_json()},
        )
    )
    s.lap("locate")
    return located


def _record_verify(s: _Session, verified: VerifyStep) -> None:
    s.report["verify"] = verified.to_json()
    s.pending.append(NewEvent("recovery.verify", data=verified.to_json()))
    crash_point("resume.verified")
    s.lap("verify")


def _assertions(
    s: _Session, start: Checkpoint, verified: VerifyStep, located: Located
) -> AssertionStep:
    """Step 3: the starting checkpoint's assertions, on the working tree as it is now."""
    tree = ensure_tree(s.ws.repo, verified.final, s.ws.settings.secret_paths)
    step = assertions_step(
        s.ws,
        (start, _assertion_source(start, located)),
        tree,
        verified,
        skip=located.mid_step,
        no_rollback=s.opts.no_rollback,
        runner=_runner(s),
        notes=BoundNotes(s.ws.store, prepared_notes(s.events)),
    )
    s.not_trusted += [w for w in step.notes.ignored.values() if w not in s.not_trusted]
    s.report["assertions"] = step.to_json()
    s.pending.append(NewEvent("recovery.assertions", data=step.to_json()))
    s.lap("assertions")
    return step


def _assertion_source(start: Checkpoint, located: Located) -> Checkpoint:
    """Whose assertions a resume checks: the resume checkpoint that stands for `start`
    (it carries them, re-pinned where a person accepted drift), else `start`'s own."""
    effective = located.effective
    if effective is not None and effective.trigger == RESUME_TRIGGER:
        return effective
    return start


def _constraints(s: _Session, tree: str) -> list[dict[str, JSON]]:
    """Every constraint, run now on the working tree (`tree`; trusted commands only):
    the failing ones. Nothing is logged but the report (contracts/engine.py)."""
    run = evaluate_for_resume(s.ws, s.task, tree)
    if any(r.kind == "command" and r.status not in ("untrusted", "unchecked") for r in run.results):
        s.commands_ran = True
    s.report["constraints"] = run.to_json()
    s.lap("constraints")
    rows = run.to_json().get("constraints")
    return [c for c in rows or [] if isinstance(c, dict) and c.get("status") in ("fail", "error")]


def _resume_state(s: _Session, start: Checkpoint) -> tuple[dict[str, JSON], list[str]]:
    """The state the task continues from: the start's (its claims checked), recovering,
    with the usage counters of now (usage is cumulative across resumes)."""
    state = s.ws.store.state_note(start.commit) or copy.deepcopy(s.state_now)
    suspects = unsupported_claims(s.ws.store, s.task, state, start)
    state = without_suspect_claims(state, suspects)
    s.not_trusted += [c.one_line() for c in suspects if c.one_line() not in s.not_trusted]
    reset = _reset_steps(s.state_now, state)
    state["status"] = "recovering"
    state["recovery"] = {"from": start.commit, "id": start.id, "report": s.report_id}
    state["usage"] = copy.deepcopy(s.state_now.get("usage") or {})
    return state, reset


def _ready(
    s: _Session,
    located: Located,
    start: Checkpoint,
    verified: VerifyStep,
    asserted: AssertionStep,
    failing: list[dict[str, JSON]],
    tree: str,
) -> ResumeOutcome:
    """Steps 4 and 5: the brief, the resume checkpoint, the report.

    The resume checkpoint records `tree`, the working tree the steps before proved or
    snapshotted, without a second snapshot; unless a trusted command ran since (it may
    have written files), then it snapshots the disk as it is now."""
    state, reset = _resume_state(s, start)
    facts = s.facts(state, "ready", start.tree)
    facts.located, facts.verified, facts.asserted = located, verified, asserted
    facts.constraints_failing, facts.steps_reset = failing, reset
    brief = build_brief(facts, max_tokens=s.opts.max_brief_tokens)
    s.report["brief"] = brief.data
    s.lap("brief")
    s.pending.append(
        NewEvent(
            "recovery.reset",
            links={"checkpoint": start.commit},
            data={"steps_reset_to_pending": reset, "report": s.report_id},
        )
    )
    blocking = [c for c in failing if c.get("severity") == "block"]
    status, outcome = (Exit.NOT_READY, "not_ready") if blocking else (Exit.OK, "ready")

    def extra(made: Checkpoint) -> Extra:
        """The report of the resume whose checkpoint is `made`, and `recovery.ready`, in the
        checkpoint's transaction."""
        crash_point("resume.checkpoint")
        s.report["resume_checkpoint"] = made.to_json()
        s.lap("checkpoint")
        s.report.update({"outcome": outcome, "exit": int(status), "timings": s.timings})
        bound, refs = _report_write(s, brief)
        data = {"report": s.report_id, "next_step": brief.data["next_step"], **bound}
        ready = NewEvent("recovery.ready", links={"checkpoint": made.commit}, data=data)
        return Extra([ready], refs)

    if blocking:
        state["status"] = "not_ready"
        state["recovery"] = {**state["recovery"], "blocked": CONSTRAINTS}
    # the recovery events so far go before the resume checkpoint's prepare
    lead, s.pending = s.pending, []
    source = start if asserted.rollback else _assertion_source(start, located)
    resumed = Resumed(
        f"resume from {start.id}",
        state,
        lead,
        None if s.commands_ran else tree,
        extra,
        asserted.carried(source),
    )
    s.ws.resume_checkpoint(s.task, resumed)
    confirm_hint = f"confirm with `git ckpt confirm {s.task} --restatement FILE`"
    if blocking:
        ids = ", ".join(str(c["id"]) for c in blocking)
        message = f"not ready: block constraint(s) {ids} fail; fix them, then {confirm_hint}"
    else:
        message = f"ready: {confirm_hint}"
    return ResumeOutcome(status, outcome, message, s.report, brief)


def _finish(s: _Session) -> ResumeOutcome:
    """A finished task: nothing to recover, nothing to confirm; next step none."""
    tip = s.view.tip
    brief = build_brief(
        s.facts(s.state_now, "finished", tip.tree if tip else None),
        max_tokens=s.opts.max_brief_tokens,
    )
    s.report.update({"outcome": "finished", "exit": 0, "next_step": None})
    _store(s, brief, "recovery.finished", {})
    message = f"task {s.task} is finished: next step none (nothing to confirm)"
    return ResumeOutcome(Exit.OK, "finished", message, s.report, brief)


def _reset_steps(now: dict[str, JSON], start: dict[str, JSON]) -> list[str]:
    before = {s["id"]: s.get("status") for s in start.get("steps") or [] if isinstance(s, dict)}
    return [
        str(s["id"])
        for s in now.get("steps") or []
        if isinstance(s, dict) and s.get("status") != before.get(s["id"], "pending")
    ]


def _store(
    s: _Session, brief: Brief | None, kind: str, data: dict[str, JSON], *after: NewEvent
) -> None:
    """The report, the event `kind` that binds it (with `data`), then `after`, with any
    events still pending before them, in one transaction."""
    bound, refs = _report_write(s, brief)
    event = NewEvent(kind, data={**data, "report": s.report_id, **bound})
    logged, s.pending = [*s.pending, event, *after], []
    s.ws.log_move(s.task, checked_moves(logged), refs)


def _report_write(s: _Session, brief: Brief | None) -> tuple[dict[str, JSON], dict[str, Compute]]:
    """The event data that binds this resume's report, and the move of the reports ref that
    stores it (`recovery/report.py`)."""
    files = report_files(s.report, brief.markdown if brief else None, s.ws.log.redactor)
    message = f"report {s.report_id}: {s.report.get('outcome')}\n"
    crash_point("resume.report")
    return report_write(s.ws.repo, s.task, s.report_id, files, message)


def _stop(s: _Session, status: Exit, message: str) -> ResumeOutcome:
    """The resume stops for a person: the task moves to not ready (`block`, with why), so
    that no later call takes the drift as the new truth until a person decides."""
    outcome = "needs_person" if status == Exit.NEEDS_PERSON else "assertions_failed"
    s.report.update(
        {"outcome": outcome, "exit": int(status), "message": message, "timings": s.timings}
    )
    reason = DRIFT if status == Exit.NEEDS_PERSON else ASSERTIONS
    recovery = {"blocked": reason, "report": s.report_id, "message": message}
    patch: dict[str, JSON] = {"status": "not_ready", "recovery": recovery}
    block = NewEvent("state.update", data={"move": "block", "patch": patch})
    _store(s, None, "recovery.stopped", {"outcome": outcome, "message": message}, block)
    return ResumeOutcome(status, outcome, message, s.report)


__all__ = ["ResumeOptions", "ResumeOutcome", "Verification", "resume"]
