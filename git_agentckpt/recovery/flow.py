"""`git ckpt resume` and `git ckpt confirm`: the five steps, in order, with a report.

1. locate the starting checkpoint;  2. verify the workspace;  3. check the
assertions (controlled rollback on failure);  4. build the recovery brief;
5. shadow confirmation: the task is `recovering` until `confirm` accepts the
agent's restatement. Every resume stores a report in `refs/agent/reports/<task>`.
"""

from __future__ import annotations

import copy
import getpass
import time
from dataclasses import dataclass, field
from pathlib import Path

from git_agentckpt.contracts.engine import make_command_runner
from git_agentckpt.contracts.schema import Contract, load_contract_dir
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import Exit, NotFound, UsageError
from git_agentckpt.model import JSON, NewEvent, iso_now, new_ulid
from git_agentckpt.recovery.assertions import (
    AssertionRun,
    CommandRunner,
    find_rollback,
    run_assertions,
)
from git_agentckpt.recovery.brief import Brief, build_brief, constraints_in_force, next_step
from git_agentckpt.recovery.confirm import Verdict, check_restatement
from git_agentckpt.recovery.locate import RESUME_TRIGGER, Located, locate
from git_agentckpt.recovery.report import read_report, report_files, save_report
from git_agentckpt.recovery.verify import Verification, ensure_tree, verify_workspace
from git_agentckpt.settings import CONTRACTS_DIR
from git_agentckpt.store.evidence import unsupported_claims, without_suspect_claims
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import read_task
from git_agentckpt.store.workspace import Workspace


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
    outcome: str  # ready | finished | needs_person | assertions_failed | brief
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


def _runner(ck: Workspace) -> CommandRunner:
    return make_command_runner(ck.repo, TrustStore(), ck.log.redactor.text)


class _Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round(now - self._t, 4)
        self._t = now


def _finished(state: dict[str, JSON]) -> bool:
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    if state.get("status") == "done":
        return True
    return bool(steps) and all(s.get("status") in ("done", "skipped") for s in steps)


def resume(ck: Workspace, task_name: str, opts: ResumeOptions) -> ResumeOutcome:
    task = TaskName(task_name)
    view = read_task(ck.store, ck.log, task)
    if view.state is None:
        raise NotFound(f"no task {task_name!r}", hint="see `git ckpt task list`")
    # a claim the history does not back (a forged or copied note) is reported, never trusted
    suspects = unsupported_claims(ck.store, task, view.state, view.tip)
    state_now = without_suspect_claims(view.state, suspects)
    contract = load_contract(ck)
    timer = _Timer()
    report_id = new_ulid()
    report: dict[str, JSON] = {"v": 1, "id": report_id, "task": task.name, "started": iso_now()}
    events: list[NewEvent] = []
    if suspects or view.skipped:
        report["suspect_state"] = [c.to_json() for c in suspects]
        report["skipped_events"] = [e.to_json() for e in view.skipped]

    def stop(status: Exit, message: str) -> ResumeOutcome:
        outcome = "needs_person" if status == Exit.NEEDS_PERSON else "assertions_failed"
        return _stop(ck, task, report, events, timer, status, outcome, message)

    if opts.brief_only:
        brief = build_brief(
            state_now,
            contract,
            ck.log.read(task),
            {"mode": "brief only"},
            max_tokens=opts.max_brief_tokens,
            n_events=opts.n_events,
        )
        return ResumeOutcome(
            Exit.OK, "brief", "brief only: nothing was changed", {"task": task.name}, brief
        )

    if _finished(state_now):
        report.update({"outcome": "finished", "exit": 0, "next_step": None})
        brief = build_brief(
            state_now,
            contract,
            [],
            {"finished": True},
            max_tokens=opts.max_brief_tokens,
            n_events=0,
        )
        _store(ck, task, report, brief, [NewEvent("recovery.finished", data={"report": report_id})])
        return ResumeOutcome(
            Exit.OK, "finished", f"task {task} is finished: next step none", report, brief
        )

    # 1. locate
    located = locate(ck.store, ck.log, task, roll_forward=True)
    if opts.from_checkpoint:
        chosen = ck.resolve(opts.from_checkpoint)
        if chosen.task != task.name:
            raise UsageError(f"checkpoint {chosen.id} belongs to task {chosen.task}, not {task}")
        located = Located(
            chosen,
            chosen,
            "named with --from",
            located.open_steps,
            [],
            located.rolled_forward,
            located.aborted,
            located.mid_step,
        )
    if located.start is None or located.effective is None:
        raise NotFound(
            f"task {task} has no complete checkpoint to resume from",
            hint=f"take one with `git ckpt create -t {task}`",
        )
    start, effective = located.start, located.effective
    report["locate"] = located.to_json()
    events.append(
        NewEvent(
            "recovery.locate",
            links={"checkpoint": start.commit},
            data={
                "reason": located.reason,
                "report": report_id,
                "open_steps": list(located.open_steps),
                "rolled_forward": list(located.rolled_forward),
                "aborted": list(located.aborted),
            },
        )
    )
    timer.lap("locate")

    # 2. verify
    settings = ck.settings
    v = verify_workspace(
        ck.repo, effective.tree, settings.regenerable, settings.secret_paths, clean=True
    )
    report["verify"] = v.to_json()
    decision: dict[str, JSON] | None = None
    if not v.clean:
        if opts.restore:
            restored = ck.restore(effective.commit)
            decision = {
                "decision": "restore",
                "safety_checkpoint": restored.safety.id if restored.safety else None,
            }
            v = verify_workspace(
                ck.repo, effective.tree, settings.regenerable, settings.secret_paths, clean=True
            )
        elif opts.accept_drift:
            decision = {"decision": "accept_drift", "files": [d["path"] for d in v.source]}
        else:
            report["verify"] = v.to_json()
            timer.lap("verify")
            return stop(
                Exit.NEEDS_PERSON,
                f"{len(v.source)} source file(s) differ from checkpoint {start.id}: "
                "rerun with --restore (bring them back) or --accept-drift (keep them)",
            )
        report["verify_decision"] = decision
    events.append(NewEvent("recovery.verify", data={**v.to_json(), "decision": decision}))
    timer.lap("verify")
    crash_point("resume.verified")

    # 3. assertions, with a controlled rollback
    runner = _runner(ck)
    tree = ensure_tree(ck.repo, v, settings.secret_paths)
    run = run_assertions(ck.store, start, ck.repo.workdir, tree, runner)
    report["assertions"] = run.to_json()
    if not run.passed:
        if opts.no_rollback:
            return stop(
                Exit.ASSERTIONS_FAILED,
                _failed_msg(run, "--no-rollback: stopping"),
            )
        target, tried = find_rollback(ck.store, start, located.mid_step, runner)
        report["rollback"] = {
            "tried": [t.to_json() for t in tried],
            "target": target.to_json() if target else None,
        }
        events.append(
            NewEvent(
                "recovery.rollback",
                data={
                    "tried": [t.checkpoint for t in tried],
                    "target": target.commit if target else None,
                },
            )
        )
        if target is None:
            return stop(
                Exit.ASSERTIONS_FAILED,
                _failed_msg(run, f"no earlier checkpoint passes ({len(tried)} tried)"),
            )
        ck.restore(target.commit)
        start = effective = target
        v = verify_workspace(
            ck.repo, target.tree, settings.regenerable, settings.secret_paths, clean=True
        )
    events.append(NewEvent("recovery.assertions", data=run.to_json()))
    timer.lap("assertions")

    # 4. the state to continue from, and the brief
    state = ck.store.state_note(start.commit) or copy.deepcopy(state_now)
    start_suspects = unsupported_claims(ck.store, task, state, start)
    state = without_suspect_claims(state, start_suspects)
    suspect_lines = sorted({c.one_line() for c in [*suspects, *start_suspects]})
    reset = _reset_steps(state_now, state)
    state["status"] = "recovering"
    state["recovery"] = {"from": start.commit, "id": start.id, "report": report_id}
    found: dict[str, JSON] = {
        "start": start.id,
        "why": located.reason,
        "source_drift": v.source,
        "regenerable_cleaned": v.cleaned,
        "to_regenerate": v.to_regenerate,
        "assertions": f"{len(run.results)} checked, passed={run.passed}",
        "steps_reset_to_pending": reset,
    }
    if decision:
        found["decision"] = decision
    if suspect_lines:
        found["suspect_state_not_trusted"] = list(suspect_lines)
    if view.skipped:
        found["skipped_events"] = [e.one_line() for e in view.skipped]
    if v.secret_left:  # differ from the checkpoint, never restored: the agent should know
        found["secret_paths_left_as_they_are"] = v.secret_left
    brief = build_brief(
        state,
        contract,
        ck.log.read(task),
        found,
        max_tokens=opts.max_brief_tokens,
        n_events=opts.n_events,
    )
    report["brief"] = brief.data
    timer.lap("brief")

    # 5. the resume checkpoint: the task is recovering until confirmed
    events.append(
        NewEvent(
            "recovery.reset",
            links={"checkpoint": start.commit},
            data={"steps_reset_to_pending": reset, "report": report_id},
        )
    )
    ck.log.append(task, events)
    events = []
    made = ck.create(
        task.name,
        message=f"resume from {start.id}",
        trigger=RESUME_TRIGGER,
        force=True,
        _state_override=state,
    )
    crash_point("resume.checkpoint")
    report["resume_checkpoint"] = made.to_json()
    timer.lap("checkpoint")
    report.update({"outcome": "ready", "exit": 0, "timings": timer.timings})
    _store(
        ck,
        task,
        report,
        brief,
        [
            NewEvent(
                "recovery.ready",
                links={"checkpoint": made.commit},
                data={"report": report_id, "next_step": brief.data["next_step"]},
            )
        ],
    )
    return ResumeOutcome(
        Exit.OK,
        "ready",
        f"ready: confirm with `git ckpt confirm {task} --restatement FILE`",
        report,
        brief,
    )


def _failed_msg(run: AssertionRun, tail: str) -> str:
    failed = [str(r["id"]) for r in run.results if r["status"] in ("fail", "error")]
    return f"assertion(s) {', '.join(failed)} fail: {tail}"


def _reset_steps(now: dict[str, JSON], start: dict[str, JSON]) -> list[str]:
    before = {s["id"]: s.get("status") for s in start.get("steps") or [] if isinstance(s, dict)}
    return [
        str(s["id"])
        for s in now.get("steps") or []
        if isinstance(s, dict) and s.get("status") != before.get(s["id"], "pending")
    ]


def _store(
    ck: Workspace,
    task: TaskName,
    report: dict[str, JSON],
    brief: Brief | None,
    events: list[NewEvent],
) -> None:
    save_report(
        ck.repo,
        task,
        str(report["id"]),
        report_files(report, brief.markdown if brief else None, ck.log.redactor),
        f"report {report['id']}: {report.get('outcome')}\n",
    )
    crash_point("resume.report")
    ck.log.append(task, events)


def _stop(
    ck: Workspace,
    task: TaskName,
    report: dict[str, JSON],
    events: list[NewEvent],
    timer: _Timer,
    status: Exit,
    outcome: str,
    message: str,
) -> ResumeOutcome:
    report.update(
        {"outcome": outcome, "exit": int(status), "message": message, "timings": timer.timings}
    )
    events.append(
        NewEvent(
            "recovery.stopped",
            data={"outcome": outcome, "message": message, "report": report["id"]},
        )
    )
    _store(ck, task, report, None, events)
    return ResumeOutcome(status, outcome, message, report)


# -- confirm ------------------------------------------------------------------------------


def confirm(
    ck: Workspace, task_name: str, restatement: str | None, by_human: bool
) -> tuple[Exit, Verdict, dict[str, JSON]]:
    task = TaskName(task_name)
    state = ck.state(task)
    if state.get("status") != "recovering":
        raise UsageError(
            f"task {task} is not recovering (status {state.get('status')})",
            hint=f"run `git ckpt resume {task}` first",
        )
    contract = load_contract(ck)
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    expected = next_step(state)
    if by_human:
        verdict = Verdict(passed=True, expected_next_step=expected)
    elif restatement is None:
        raise UsageError("confirm needs --restatement FILE|- (or --by-human)")
    else:
        verdict = check_restatement(
            restatement,
            goal=str(state.get("goal", "")),
            constraints=constraints_in_force(state, contract),
            expected_next=expected,
            done_steps=[str(s["id"]) for s in steps if s.get("status") == "done"],
            step_titles={str(s["id"]): str(s.get("title", "")) for s in steps},
            contract=contract,
        )
    who = {"agent": f"human:{getpass.getuser()}"} if by_human else {}
    recovery = state.get("recovery")
    report_id = recovery.get("report") if isinstance(recovery, dict) else None
    result = {**verdict.to_json(), "by": "human" if by_human else "checker"}
    events = [NewEvent("recovery.restatement", who, input=restatement, data={"report": report_id})]
    if verdict.passed:
        events.append(NewEvent("recovery.confirmed", who, data=result))
        events.append(NewEvent("state.update", who, data={"patch": {"status": "active"}}))
    else:
        events.append(NewEvent("recovery.rejected", who, data=result))
    crash_point("confirm.checked")
    ck.log.append(task, events)
    crash_point("confirm.logged")
    if isinstance(report_id, str):
        try:
            report = read_report(ck.repo, task, report_id)
        except NotFound:
            report = None
        if report is not None:
            report.pop("files", None)
            report.pop("path", None)
            report["confirmation"] = result
            files = report_files(
                report, None, ck.log.redactor, restatement or "(approved by a person)"
            )
            save_report(
                ck.repo,
                task,
                report_id,
                files,
                f"report {report_id}: {'confirmed' if verdict.passed else 'rejected'}\n",
            )
    return (Exit.OK if verdict.passed else Exit.BAD_RESTATEMENT), verdict, result


__all__ = ["ResumeOptions", "ResumeOutcome", "Verification", "confirm", "resume"]
