"""`git ckpt confirm`: the agent's restatement checked (or a person's approval); the
verdict, the task's move to active and the recovery report's confirmation committed as
one transaction."""

from __future__ import annotations

import getpass

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import Exit, NotFound, UsageError
from git_agentckpt.lifecycle import PAUSED
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.recovery.brief import next_step
from git_agentckpt.recovery.confirm import Verdict, check_restatement
from git_agentckpt.recovery.context import constraints_for_state
from git_agentckpt.recovery.flow import load_contract
from git_agentckpt.recovery.not_ready import require_ready_now
from git_agentckpt.recovery.report import read_report, report_files, report_write, stored_blobs
from git_agentckpt.store.checkpoints import Compute
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace, checked_moves


def confirm(
    ws: Workspace, task_name: str, restatement: str | None, by_human: bool
) -> tuple[Exit, Verdict, dict[str, JSON]]:
    """Check the restatement (or take a person's approval) of a recovering task, or of a
    not-ready one whose block constraints now pass; log the verdict, the move to active
    when it passes, and the report's confirmation, in one transaction."""
    task = TaskName(task_name)
    state = ws.require_own(task)
    if state.get("status") not in PAUSED:
        raise UsageError(
            f"task {task} is not recovering (status {state.get('status')})",
            hint=f"run `git ckpt resume {task}` first",
        )
    if state.get("status") == "not_ready":
        require_ready_now(ws, task, state)
    recovery = state.get("recovery")
    report_id = recovery.get("report") if isinstance(recovery, dict) else None
    verdict = _verdict(ws, state, restatement, by_human)
    who = {"agent": f"human:{getpass.getuser()}"} if by_human else {}
    result = {**verdict.to_json(), "by": "human" if by_human else "checker"}
    events = [NewEvent("recovery.restatement", who, input=restatement, data={"report": report_id})]
    crash_point("confirm.checked")
    bound, refs = _confirmation(ws, task, report_id, result, restatement)
    data = {**result, "report": report_id, **bound}
    if verdict.passed:
        events.append(NewEvent("recovery.confirmed", who, data=data))
        patch = {"status": "active"}
        events.append(NewEvent("state.update", who, data={"move": "confirm", "patch": patch}))
    else:
        events.append(NewEvent("recovery.rejected", who, data=data))
    ws.log_move(task, checked_moves(events), refs)
    crash_point("confirm.logged")
    return (Exit.OK if verdict.passed else Exit.BAD_RESTATEMENT), verdict, result


def _verdict(
    ws: Workspace, state: dict[str, JSON], restatement: str | None, by_human: bool
) -> Verdict:
    expected = next_step(state)
    if by_human:
        return Verdict(passed=True, expected_next_step=expected)
    if restatement is None:
        raise UsageError("confirm needs --restatement FILE|- (or --by-human)")
    contract = load_contract(ws)
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    return check_restatement(
        restatement,
        goal=str(state.get("goal", "")),
        constraints=constraints_for_state(ws.repo, contract, state),
        expected_next=expected,
        done_steps=[str(s["id"]) for s in steps if s.get("status") == "done"],
        step_titles={str(s["id"]): str(s.get("title", "")) for s in steps},
        contract=contract,
    )


def _confirmation(
    ws: Workspace, task: TaskName, report_id: JSON, result: dict[str, JSON], text: str | None
) -> tuple[dict[str, JSON], dict[str, Compute]]:
    """The move of the reports ref that records the verdict in the resume's report, and
    the event data that binds it: the blobs written, and the ones read (`report_read`)."""
    if not isinstance(report_id, str):
        return {}, {}
    try:
        report = read_report(ws.repo, task, report_id)
    except NotFound:
        return {}, {}
    found = stored_blobs(ws.repo, task, report_id)
    report.pop("files", None)
    report.pop("path", None)
    report["confirmation"] = result
    files = report_files(report, None, ws.log.redactor, text or "(approved by a person)")
    verdict = "confirmed" if result.get("passed") else "rejected"
    bound, refs = report_write(ws.repo, task, report_id, files, f"report {report_id}: {verdict}\n")
    return {**bound, "report_read": found}, refs


__all__ = ["confirm"]
