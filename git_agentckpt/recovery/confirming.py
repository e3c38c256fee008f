"""`git ckpt confirm`: the agent's restatement checked (or a person's approval), the
verdict logged (the commit point), then the recovery report updated; a confirm killed
between the two is rolled forward by the next one."""

from __future__ import annotations

import getpass

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import Exit, NotFound, UsageError
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.recovery.brief import next_step
from git_agentckpt.recovery.confirm import Verdict, check_restatement
from git_agentckpt.recovery.context import constraints_for_state
from git_agentckpt.recovery.flow import load_contract
from git_agentckpt.recovery.report import read_report, report_files, save_report
from git_agentckpt.store.log_index import key_events
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace


def confirm(
    ws: Workspace, task_name: str, restatement: str | None, by_human: bool
) -> tuple[Exit, Verdict, dict[str, JSON]]:
    task = TaskName(task_name)
    state = ws.require_own(task)
    if state.get("status") != "recovering":
        completed = _complete_confirmation(ws, task)
        if completed is not None:  # a confirm killed after its verdict was logged
            return completed
        raise UsageError(
            f"task {task} is not recovering (status {state.get('status')})",
            hint=f"run `git ckpt resume {task}` first",
        )
    recovery = state.get("recovery")
    report_id = recovery.get("report") if isinstance(recovery, dict) else None
    contract = load_contract(ws)
    constraints = constraints_for_state(ws.repo, contract, state)
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
            constraints=constraints,
            expected_next=expected,
            done_steps=[str(s["id"]) for s in steps if s.get("status") == "done"],
            step_titles={str(s["id"]): str(s.get("title", "")) for s in steps},
            contract=contract,
        )
    who = {"agent": f"human:{getpass.getuser()}"} if by_human else {}
    result = {**verdict.to_json(), "by": "human" if by_human else "checker"}
    events = [NewEvent("recovery.restatement", who, input=restatement, data={"report": report_id})]
    if verdict.passed:
        events.append(NewEvent("recovery.confirmed", who, data={**result, "report": report_id}))
        events.append(NewEvent("state.update", who, data={"patch": {"status": "active"}}))
    else:
        events.append(NewEvent("recovery.rejected", who, data={**result, "report": report_id}))
    crash_point("confirm.checked")
    ws.log.append(task, events)
    crash_point("confirm.logged")
    if isinstance(report_id, str):
        _save_confirmation(ws, task, report_id, result, restatement)
    return (Exit.OK if verdict.passed else Exit.BAD_RESTATEMENT), verdict, result


def _save_confirmation(
    ws: Workspace, task: TaskName, report_id: str, result: dict[str, JSON], text: str | None
) -> None:
    try:
        report = read_report(ws.repo, task, report_id)
    except NotFound:
        return
    report.pop("files", None)
    report.pop("path", None)
    report["confirmation"] = result
    files = report_files(report, None, ws.log.redactor, text or "(approved by a person)")
    verdict = "confirmed" if result.get("passed") else "rejected"
    save_report(ws.repo, task, report_id, files, f"report {report_id}: {verdict}\n")


def _complete_confirmation(
    ws: Workspace, task: TaskName
) -> tuple[Exit, Verdict, dict[str, JSON]] | None:
    """Roll a confirm forward: its verdict is logged (the commit point) but its report
    was never updated (killed in between). None when there is nothing to complete."""
    events = key_events(ws.log, task)
    at = next((i for i in range(len(events) - 1, -1, -1) if events[i].type in _VERDICTS), None)
    if at is None or events[at].type != "recovery.confirmed":
        return None
    report_id = events[at].data.get("report")
    if not isinstance(report_id, str):
        return None
    try:
        if "confirmation" in read_report(ws.repo, task, report_id):
            return None
    except NotFound:
        return None
    said = [e for e in events[:at] if e.type == "recovery.restatement"]
    text = said[-1].input if said and isinstance(said[-1].input, str) else None
    result = {k: v for k, v in events[at].data.items() if k != "report"}
    _save_confirmation(ws, task, report_id, result, text)
    verdict = Verdict(passed=True, expected_next_step=_str(result.get("expected_next_step")))
    return Exit.OK, verdict, result


_VERDICTS = ("recovery.confirmed", "recovery.rejected", "recovery.ready")


def _str(value: JSON) -> str | None:
    return value if isinstance(value, str) else None


__all__ = ["confirm"]
