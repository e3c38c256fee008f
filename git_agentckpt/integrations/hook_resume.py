"""What a SessionStart hook gives the model: the recovery brief, or why it cannot continue.

- `compact` (the context was cut, the files were not): the brief of the recorded
  state, as `git ckpt resume TASK --brief-only` prints it.
- `resume` (a restarted session, perhaps after a kill): the five-step resume, as
  `git ckpt resume TASK` runs it by default (never `--restore` nor
  `--accept-drift`: nothing is restored silently). Ready or not ready: its brief.
  Stopped (source files drifted, assertions failed): the findings file by file,
  what the agent must do instead (ask the person; the two commands), and the
  brief of the recorded state, marked as not verified.
- A task that waits for its recovery says so, whatever the source: recovering (or
  not ready on a failing block constraint), the brief ends with the restatement form
  and the confirm command; not ready on drift or failing assertions, the findings of
  the resume that stopped are given again, with the same question for the person,
  until a person decides (`resume --restore` or `--accept-drift`).

Every text starts with `REPLACES`: `claude --continue` and `codex exec resume` replay
every brief given before, oldest first, and the newest is the one that holds.

The text is kept under Claude Code's inline limit for hook output (~50K
characters): the brief is asked for at most `BRIEF_TOKENS` (events, outputs and
environment trimmed; constraints are never cut), and a text still longer is cut
at `MAX_CONTEXT` characters with a note naming the command that shows it whole.
"""

from __future__ import annotations

from typing import Any

from git_agentckpt.errors import CkptError
from git_agentckpt.model import JSON
from git_agentckpt.recovery.brief import Brief
from git_agentckpt.recovery.flow import ResumeOptions, resume
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

MAX_CONTEXT = 45_000  # characters; Claude Code does not inject hook output over ~50K inline
BRIEF_TOKENS = 9_000
RESUME_LINE = "This brief changed nothing: run `git ckpt resume` to recover the task."
COMPACT_LINE = (
    "The files did not change with the compaction: continue from the next step above "
    "(no `git ckpt resume` is needed)."
)
REPLACES = (
    "[git ckpt brief: it replaces every earlier git ckpt brief in this conversation, "
    "which no longer holds; where they differ, this one is right]"
)


def fit(text: str, where: str) -> str:
    """`text`, cut to MAX_CONTEXT characters with a note saying where the whole is."""
    if len(text) <= MAX_CONTEXT:
        return text
    note = f"\n\n[cut at {MAX_CONTEXT} of {len(text)} characters: the whole text: {where}]"
    return text[: MAX_CONTEXT - len(note)] + note


def _recorded(ws: Workspace, task: TaskName) -> Brief:
    out = resume(ws, task.name, ResumeOptions(brief_only=True, max_brief_tokens=BRIEF_TOKENS))
    assert out.brief is not None
    return out.brief


def brief_context(ws: Workspace, task: TaskName, why: str) -> tuple[str, str]:
    """The brief of the recorded state (nothing changed), what a task that waits for its
    recovery waits for first; and a word for the log."""
    brief = _recorded(ws, task)
    waits = brief.data.get("waiting")
    intro = (
        f"Below is the recovery brief of task {task}, from its event log and checkpoints: "
        "the goal, every constraint verbatim (they are in force), the steps done and the "
        "next step."
    )
    if not isinstance(waits, dict):
        body = brief.markdown.replace(RESUME_LINE, COMPACT_LINE)
        return fit(f"git ckpt: {why}. {intro}\n\n{body}", _brief_cmd(task)), "brief"
    if waits.get("needs") == "person":
        return _still_asking(ws, task, why, waits, brief), "still waiting for a person"
    head = (
        f"git ckpt: {why}. Task {task} WAITS FOR ITS RECOVERY TO BE CONFIRMED: "
        f"{waits.get('why')}; no step moves and no checkpoint is taken until "
        f"`git ckpt confirm` accepts your restatement. {intro} Before anything else, fill "
        "in the restatement form at its end and run the confirm command."
    )
    return fit(f"{head}\n\n{brief.markdown}", _brief_cmd(task)), f"brief ({waits.get('status')})"


def _brief_cmd(task: TaskName) -> str:
    return f"`git ckpt resume {task} --brief-only`"


def _drift_lines(report: dict[str, Any]) -> list[str]:
    verify = report.get("verify") if isinstance(report.get("verify"), dict) else {}
    assert isinstance(verify, dict)
    lines = []
    for d in verify.get("source_drift") or []:
        if isinstance(d, dict):
            lines.append(f"- {d.get('change')}: {d.get('path')}")
    return lines


def _assertion_lines(report: dict[str, Any]) -> list[str]:
    asserted = report.get("assertions") if isinstance(report.get("assertions"), dict) else {}
    assert isinstance(asserted, dict)
    return [
        f"- {r.get('id')} ({r.get('status')}): {r.get('detail')}"
        for r in asserted.get("results") or []
        if isinstance(r, dict) and r.get("status") != "pass"
    ]


def _start_id(report: dict[str, JSON]) -> str:
    locate = report.get("locate")
    start = locate.get("start") if isinstance(locate, dict) else None
    return str(start.get("id")) if isinstance(start, dict) else "?"


def stopped_context(
    task: TaskName, outcome: str, head: str, report: dict[str, JSON], brief: Brief
) -> str:
    """Why the resume stopped (`head`), file by file, what to do instead, and the brief
    of the recorded state."""
    report_cmd = f"`git ckpt report {task} {report.get('id')}`"
    lines = [head, ""]
    drift = _drift_lines(report)
    if drift:
        lines += [
            f"These source files differ from checkpoint {_start_id(report)} (nothing was "
            "restored, nothing was changed):",
            *drift,
            "",
        ]
    failing = _assertion_lines(report) if outcome == "assertions_failed" else []
    if failing:
        lines += ["These assertions of the checkpoint fail now:", *failing, ""]
    lines += [
        "What you must do instead: do not continue the task's steps, and do not undo, "
        "redo or overwrite these files yourself. Tell the person what differs and ask "
        "them to decide:",
        f"- `git ckpt resume {task} --restore`: bring the checkpoint's files back (a "
        "safety checkpoint keeps the current ones);",
        f"- `git ckpt resume {task} --accept-drift`: keep the files as they are (recorded "
        "in a new checkpoint).",
        "Until a person runs one of them the task stays not ready: no step moves, no "
        "checkpoint is taken, and every later brief asks the same.",
        f"The full report: {report_cmd}.",
        "",
        "For reference, the task as its last checkpoint recorded it (NOT verified "
        "against the files above):",
        "",
        brief.markdown,
    ]
    return fit("\n".join(lines), report_cmd)


def _still_asking(
    ws: Workspace, task: TaskName, why: str, waits: dict[str, JSON], brief: Brief
) -> str:
    """A task not ready for a person's decision: the findings of the resume that stopped
    (its report: nothing is run again) and the same question."""
    from git_agentckpt.recovery.report import read_report

    rid = waits.get("report")
    try:
        report = read_report(ws.repo, task, rid if isinstance(rid, str) else None)
    except CkptError:  # no report to show: what the brief says is the question
        return fit(f"git ckpt: {why}. {waits.get('why')}.\n\n{brief.markdown}", _brief_cmd(task))
    head = (
        f"git ckpt: {why}. Task {task} is still NOT resumed: its resume stopped "
        f"({report.get('message')}) and a person has not decided yet. The question was "
        "asked before and is still open: ask the person again."
    )
    return stopped_context(task, str(report.get("outcome")), head, report, brief)


def resume_context(ws: Workspace, task: TaskName) -> tuple[str, str]:
    """The five-step resume; its brief, or why it stopped. And a word for the log."""
    out = resume(ws, task.name, ResumeOptions(max_brief_tokens=BRIEF_TOKENS))
    report_cmd = f"`git ckpt report {task} {out.report.get('id')}`"
    if out.brief is None:
        head = f"git ckpt: task {task} was NOT resumed: {out.message}."
        recorded = _recorded(ws, task)
        return stopped_context(task, out.outcome, head, out.report, recorded), out.outcome
    head = (
        f"git ckpt: this session was restarted; task {task} was resumed "
        f"({out.outcome}: {out.message}). Below is its recovery brief: the goal, every "
        "constraint verbatim (they are in force), what the resume did file by file, the "
        "steps done and the next step.\n\n"
    )
    return fit(head + out.brief.markdown, report_cmd), out.outcome
