"""What a SessionStart hook gives the model: the recovery brief, or why it cannot continue.

- `compact` (the context was cut, the files were not): the brief of the recorded
  state, as `git ckpt resume TASK --brief-only` prints it.
- `resume` (a restarted session, perhaps after a kill): the five-step resume, as
  `git ckpt resume TASK` runs it by default (never `--restore` nor
  `--accept-drift`: nothing is restored silently). Ready or not ready: its brief.
  Stopped (source files drifted, assertions failed): the findings file by file,
  what the agent must do instead (ask the person; the two commands), and the
  brief of the recorded state, marked as not verified.

The text is kept under Claude Code's inline limit for hook output (~50K
characters): the brief is asked for at most `BRIEF_TOKENS` (events, outputs and
environment trimmed; constraints are never cut), and a text still longer is cut
at `MAX_CONTEXT` characters with a note naming the command that shows it whole.
"""

from __future__ import annotations

from typing import Any

from git_agentckpt.model import JSON
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


def fit(text: str, where: str) -> str:
    """`text`, cut to MAX_CONTEXT characters with a note saying where the whole is."""
    if len(text) <= MAX_CONTEXT:
        return text
    note = f"\n\n[cut at {MAX_CONTEXT} of {len(text)} characters: the whole text: {where}]"
    return text[: MAX_CONTEXT - len(note)] + note


def brief_context(ws: Workspace, task: TaskName, why: str) -> tuple[str, str]:
    """The brief of the recorded state (nothing changed); and a word for the log."""
    out = resume(ws, task.name, ResumeOptions(brief_only=True, max_brief_tokens=BRIEF_TOKENS))
    assert out.brief is not None
    body = out.brief.markdown.replace(RESUME_LINE, COMPACT_LINE)
    head = (
        f"git ckpt: {why}. Below is the recovery brief of task {task}, from its event log "
        "and checkpoints: the goal, every constraint verbatim (they are in force), the "
        "steps done and the next step.\n\n"
    )
    return fit(head + body, f"`git ckpt resume {task} --brief-only`"), "brief"


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
    ws: Workspace, task: TaskName, outcome: str, message: str, report: dict[str, JSON]
) -> str:
    """Why the resume stopped, file by file, what to do instead, and the recorded brief."""
    report_cmd = f"`git ckpt report {task} {report.get('id')}`"
    lines = [f"git ckpt: task {task} was NOT resumed: {message}.", ""]
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
        f"The full report: {report_cmd}.",
    ]
    recorded = resume(ws, task.name, ResumeOptions(brief_only=True, max_brief_tokens=BRIEF_TOKENS))
    if recorded.brief is not None:
        lines += [
            "",
            "For reference, the task as its last checkpoint recorded it (NOT verified "
            "against the files above):",
            "",
            recorded.brief.markdown,
        ]
    return fit("\n".join(lines), report_cmd)


def resume_context(ws: Workspace, task: TaskName) -> tuple[str, str]:
    """The five-step resume; its brief, or why it stopped. And a word for the log."""
    out = resume(ws, task.name, ResumeOptions(max_brief_tokens=BRIEF_TOKENS))
    report_cmd = f"`git ckpt report {task} {out.report.get('id')}`"
    if out.brief is None:
        return stopped_context(ws, task, out.outcome, out.message, out.report), out.outcome
    head = (
        f"git ckpt: this session was restarted; task {task} was resumed "
        f"({out.outcome}: {out.message}). Below is its recovery brief: the goal, every "
        "constraint verbatim (they are in force), what the resume did file by file, the "
        "steps done and the next step.\n\n"
    )
    return fit(head + out.brief.markdown, report_cmd), out.outcome
