"""`git ckpt mcp`: the task store as an MCP server over stdio.

Built on the official `mcp` Python SDK 2.x (`MCPServer`). The SDK serves both
protocol eras on the same pipe: the 2026-07-28 stateless one (`server/discover`,
a protocol version in every request's `_meta`) and the older `initialize`
handshake (2024-11-05 to 2025-11-25). While it serves, the SDK points fd 0 at
/dev/null and fd 1 at stderr, so a child process (git, a constraint's command)
can never read from or write into the protocol stream.

Each tool call opens the repository afresh (`api.Checkpointer.open`), as one
`git ckpt` call would, so edits to `.agent/ckpt.toml` or the contract made
during the session are seen; calls run one at a time (the SDK runs synchronous
tools on worker threads). A refusal or failure is an MCP tool error carrying the
one-line message (`CkptError.one_line`: what happened and what to do next),
never a traceback, and the server keeps serving. Resources and prompts report
theirs as protocol errors with the same line. A line the SDK cannot read (a lone
surrogate, deep nesting, not JSON-RPC) is answered too (`cli/mcp_stdio.py`).

This module imports the SDK; `cli/commands_mcp.py` imports it only when
`git ckpt mcp` runs, so no other command pays for it.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from pydantic import Field

from git_agentckpt import __version__
from git_agentckpt.api import Checkpointer
from git_agentckpt.cli.mcp_stdio import AnsweringServer
from git_agentckpt.errors import CkptError, NotFound, errno_in_text, system_refused
from git_agentckpt.model import JSON

T = TypeVar("T")
ACTOR = "mcp"

INSTRUCTIONS = """\
git ckpt keeps this project's long task resumable: checkpoints of the working tree,
the task state (goal, steps, constraints) and an event log, all in git.
- At the start of a session, and after your context was compacted or cut, call
  task_status. If the task is `recovering`, or you lost track, call resume, read the
  brief it returns (constraints verbatim, done steps, next step) and call confirm with
  your restatement before any other work.
- Before you work on a step call step_start; when its outputs are written call
  step_done (that commits the checkpoint that makes the step done). Never redo a
  step marked done.
- Log notable actions with event_append (tool.call, file.write, model.call).
- Take checkpoint_create before a risky or expensive operation.
- Call check_constraints before you say you are finished; fix every failing
  `block` constraint first.
The task can be omitted when GIT_CKPT_TASK is set or exactly one task is active.
"""

TaskArg = Annotated[
    str | None,
    Field(description="Task name. Leave empty to use $GIT_CKPT_TASK or the single active task."),
]


class ToolFailed(Exception):
    """A call's failure as the one line the model reads; `not_found` for a missing task."""

    def __init__(self, line: str, not_found: bool = False) -> None:
        super().__init__(line)
        self.not_found = not_found


def failure_line(exc: BaseException) -> str:
    """The one-line message of anything a call raised (the CLI's mapping, `cli/main.py`)."""
    if isinstance(exc, CkptError):
        return exc.one_line()
    if isinstance(exc, OSError):
        err = exc.errno if exc.errno is not None else errno_in_text(str(exc))
        path = exc.filename if isinstance(exc.filename, str) else None
        refused = system_refused(err, path, "git ckpt mcp")
        if refused is not None:
            return refused.one_line()
    if os.environ.get("GIT_CKPT_DEBUG"):
        traceback.print_exception(exc, file=sys.stderr)
    return (
        f"internal error: {type(exc).__name__}: {exc} (rerun with GIT_CKPT_DEBUG=1 and report it)"
    )


class CkptMCP:
    """The tools, prompt and resources over the repository at `path`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()  # one call at a time, as separate `git ckpt` calls

    def call(self, body: Callable[[Checkpointer], T]) -> tuple[T, list[str]]:
        """`body` on a freshly opened repository: its result and the warnings of its reads.
        Anything raised becomes `ToolFailed` with the one-line message."""
        with self.lock:
            try:
                ck = Checkpointer.open(self.path)
                return body(ck), list(ck.warnings)
            except Exception as exc:
                raise ToolFailed(failure_line(exc), isinstance(exc, NotFound)) from None

    def answer(self, body: Callable[[Checkpointer], tuple[str, JSON]]) -> CallToolResult:
        """A tool call: text for the model and the same facts as structured content."""
        try:
            (text, data), warnings = self.call(body)
        except ToolFailed as exc:
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
        text += "".join(f"\nwarning: {w}" for w in warnings)
        structured = data if isinstance(data, dict) else {"result": data}
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured
        )

    def read(self, body: Callable[[Checkpointer], str]) -> str:
        """A resource read or a prompt: a failure is a protocol error with the one line
        (invalid params for a task that does not exist)."""
        try:
            return self.call(body)[0]
        except ToolFailed as exc:
            code = INVALID_PARAMS if exc.not_found else INTERNAL_ERROR
            raise MCPError(code, str(exc)) from None


# -- what each tool does (facade calls; texts written for a model) ----------------------


def next_step(state: dict[str, JSON]) -> str | None:
    """The step to work on now: the one in progress, else the first pending or failed."""
    steps = [s for s in state.get("steps") or [] if isinstance(s, dict)]
    for wanted in (("in_progress",), ("pending", "failed")):
        for s in steps:
            if s.get("status") in wanted:
                return str(s.get("id"))
    return None


def status_text(state: dict[str, JSON]) -> str:
    lines = [
        f"task {state.get('task')} is {state.get('status')}",
        f"goal: {state.get('goal', '')}",
    ]
    for s in state.get("steps") or []:
        if isinstance(s, dict):
            lines.append(f"  [{s.get('status')}] {s.get('id')}: {s.get('title')}")
    constraints = state.get("constraints_in_force") or []
    if isinstance(constraints, list) and constraints:
        lines.append("constraints in force: " + ", ".join(map(str, constraints)))
    nxt = next_step(state)
    lines.append(f"next step: {nxt}" if nxt else "no step left to do")
    if state.get("status") == "recovering":
        lines.append("Call resume, then confirm with your restatement, before any other work.")
    if state.get("status") == "not_ready":
        lines.append(
            "Not ready: call resume to see why; a person decides about drifted files, and a "
            "failing block constraint must pass before you confirm."
        )
    return "\n".join(lines)


def check_text(outcome: dict[str, JSON]) -> str:
    rows = [c for c in outcome.get("constraints") or [] if isinstance(c, dict)]
    blocking = outcome.get("blocking_failures") or []
    head = f"{len(rows)} constraint(s) checked; " + (
        f"BLOCKING FAILURES: {', '.join(map(str, blocking))}" if blocking else "none blocking"
    )
    lines = [head]
    for c in rows:
        detail = f" ({c.get('detail')})" if c.get("detail") else ""
        lines.append(
            f"  {c.get('status')} [{c.get('severity')}] {c.get('id')}: {c.get('text')}{detail}"
        )
    if outcome.get("recommendation"):
        lines.append(str(outcome["recommendation"]))
    if blocking:
        lines.append("Fix every failing block constraint before you continue or finish.")
    return "\n".join(lines)


def described(fn: Callable[..., Any]) -> str:
    """A tool's docstring as the one paragraph its description is."""
    return " ".join(inspect.cleandoc(fn.__doc__ or "").split())


class CkptTools(CkptMCP):
    """What the model calls. Each docstring is the tool's description: when to call it,
    what it returns, what to do next."""

    def task_status(self, task: TaskArg = None) -> CallToolResult:
        """The task's current state: goal, every step with its status, the constraints in
        force and the next step. Call it at the start of a session and whenever you are
        unsure what to do next. If it says `recovering`, call resume, then confirm."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            name = ck.require_task(task).name
            state = {**ck.state(name), "constraints_in_force": ck.constraints_in_force(name)}
            return status_text(state), state

        return self.answer(body)

    def step_start(
        self,
        step_id: Annotated[str, Field(description="The id of the step, as task_status lists it.")],
        risk: Annotated[
            Literal["low", "medium", "high"] | None,
            Field(description="high: a full checkpoint is taken first, so the step can be undone."),
        ] = None,
        task: TaskArg = None,
    ) -> CallToolResult:
        """Mark a step in progress before you work on it (a pending step, or a failed one
        to retry). Refused for a done step: do not redo finished work. Returns the mode
        (start, retry, redo) and the checkpoint taken first for a high-risk step. When the
        work is written, call step_done."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            t = ck.require_task(task).name
            ev = ck.step_start(t, step_id, risk=risk)
            pre = ev.data.get("checkpoint")
            text = f"step {step_id} of task {t}: {ev.data.get('mode')} (event #{ev.seq})"
            if pre:
                text += f"; checkpoint {str(pre)[:12]} taken first"
            return text + f". Call step_done with step_id={step_id!r} when it is finished.", (
                ev.to_json()
            )

        return self.answer(body)

    def step_done(
        self,
        step_id: Annotated[str, Field(description="The id of the step you finished.")],
        outputs: Annotated[
            dict[str, Any] | None,
            Field(description="What the step produced (files, numbers), as a JSON object."),
        ] = None,
        task: TaskArg = None,
    ) -> CallToolResult:
        """Mark a step done once its outputs are written: logs step.end and commits the
        full checkpoint that makes it done (a step is done only then). Returns the
        checkpoint and the next step to start."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            t = ck.require_task(task).name
            made = ck.step_done(t, step_id, outputs)
            nxt = next_step(ck.state(t))
            then = f"next step: {nxt} (call step_start)" if nxt else "every step is done"
            return f"step {step_id} done: checkpoint {made.id}; {then}", made.to_json()

        return self.answer(body)

    def checkpoint_create(
        self,
        message: Annotated[str, Field(description="Why, in a few words.")] = "",
        light: Annotated[
            bool, Field(description="Record state and events only, without scanning files.")
        ] = False,
        step: Annotated[str | None, Field(description="The step it belongs to.")] = None,
        task: TaskArg = None,
    ) -> CallToolResult:
        """Take a checkpoint of the working tree and the task state now, e.g. before a risky
        edit, a long run or a large refactor. Returns its id, which `git ckpt restore`
        brings back. Your files, index and branches are not touched."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            made = ck.create(ck.require_task(task).name, message, light, step=step, actor=ACTOR)
            return f"checkpoint {made.id} of task {made.task} ({made.kind})", made.to_json()

        return self.answer(body)

    def event_append(
        self,
        type: Annotated[
            str, Field(description="Dotted lower-case type: tool.call, file.write, model.call, …")
        ],
        data: Annotated[
            dict[str, Any] | None,
            Field(
                description="Event fields: input, output, step, and anything else (as data). "
                "Secrets are redacted before they are stored."
            ),
        ] = None,
        task: TaskArg = None,
    ) -> CallToolResult:
        """Append one event to the task's audit log: a tool call, a file written, a decision
        and why. Returns the event's id and number. State changes are not events: use
        step_start / step_done for those."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            t = ck.require_task(task).name
            ev = ck.event(t, type, data or {}, ACTOR)
            return f"event #{ev.seq} ({ev.type}) logged to task {t}: {ev.id}", ev.to_json()

        return self.answer(body)

    def check_constraints(self, task: TaskArg = None) -> CallToolResult:
        """Check every constraint of .agent/contracts/ against the working tree now (only
        commands a person approved run). Call it before you say the task or a step is
        finished. Returns each constraint's status; fix every failing `block` one."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            out = ck.check(ck.require_task(task).name).to_json()
            return check_text(out), out

        return self.answer(body)

    def resume(
        self,
        task: TaskArg = None,
        brief_only: Annotated[
            bool, Field(description="Only return the brief of the current state; change nothing.")
        ] = False,
        restore: Annotated[
            bool, Field(description="Bring drifted source files back to the checkpoint.")
        ] = False,
        accept_drift: Annotated[
            bool, Field(description="Keep drifted files and record them in a new checkpoint.")
        ] = False,
    ) -> CallToolResult:
        """Reconstruct the task after an interruption or a context compaction: verifies the
        files, checks the assertions, and returns the recovery brief (goal, constraints
        verbatim, done steps, the next step, and a restatement form). Read it, then call
        confirm with the form filled in; the task stays `recovering` until then.
        brief_only returns the brief without changing anything."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            t = ck.require_task(task).name
            out = ck.resume(t, brief_only=brief_only, restore=restore, accept_drift=accept_drift)
            parts = [] if out.outcome == "brief" else [f"{out.outcome}: {out.message}"]
            if out.brief is not None:
                parts.append(out.brief.markdown)
            if out.outcome == "ready":
                parts.append("Now call confirm with your restatement (the form above).")
            return "\n\n".join(parts), out.to_json()

        return self.answer(body)

    def confirm(
        self,
        restatement: Annotated[
            str,
            Field(
                description="Your restatement: the form at the end of the brief, filled in "
                "(goal, one line per constraint id, done steps, next step)."
            ),
        ],
        task: TaskArg = None,
    ) -> CallToolResult:
        """After resume: prove you have the task right. Your restatement is checked against
        the goal, every constraint, the done steps and the next step. On a pass the task is
        active again; otherwise the problems are listed: fix them and call confirm again."""

        def body(ck: Checkpointer) -> tuple[str, JSON]:
            t = ck.require_task(task).name
            status, verdict, result = ck.confirm(t, restatement)
            if verdict.passed:
                nxt = verdict.expected_next_step or "none"
                text = f"confirmed: task {t} is active again; next step {nxt}"
            else:
                text = f"NOT confirmed: task {t} stays recovering. Problems:\n" + "\n".join(
                    f"- {p}" for p in verdict.problems
                )
            return text, {**result, "exit": status, "task": t}

        return self.answer(body)

    def recovery_brief(self, task: str = "") -> str:
        """The recovery brief of the task (goal, constraints verbatim, done steps, next
        step): paste it into a fresh context to pick the work up again."""

        def body(ck: Checkpointer) -> str:
            t = ck.require_task(task or None).name
            brief = ck.resume(t, brief_only=True).brief
            return brief.markdown if brief is not None else f"task {t}: no brief"

        return self.read(body)

    def tasks_resource(self) -> str:
        return self.read(lambda ck: json.dumps(ck.task_summaries(), indent=2))

    def task_state_resource(self, task: str) -> str:
        return self.read(lambda ck: json.dumps(ck.state(ck.require_task(task)), indent=2))


TOOLS = (
    "task_status",
    "step_start",
    "step_done",
    "checkpoint_create",
    "event_append",
    "check_constraints",
    "resume",
    "confirm",
)


def build_server(path: str = ".") -> MCPServer:
    """The `git ckpt` MCP server over the repository at `path` (not started)."""
    tools = CkptTools(path)
    mcp = AnsweringServer(
        name="git-ckpt",
        title="git ckpt: checkpoints, task state and event log in git",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )
    for name in TOOLS:
        method = getattr(tools, name)
        mcp.tool(description=described(method))(method)
    brief = tools.recovery_brief
    mcp.prompt("recovery_brief", "Recovery brief of a git ckpt task", described(brief))(brief)
    mcp.resource(
        "ckpt://tasks",
        name="tasks",
        description="Every task of this repository: status, steps done, goal (JSON).",
        mime_type="application/json",
    )(tools.tasks_resource)
    mcp.resource(
        "ckpt://tasks/{task}/state",
        name="task-state",
        description="The current state of one task (JSON): goal, steps, constraints, usage.",
        mime_type="application/json",
    )(tools.task_state_resource)
    return mcp


def serve(path: str) -> None:
    """Serve on stdin/stdout until the client closes the pipe."""
    Checkpointer.open(path)  # not a repository: the usual error, before any protocol
    build_server(path).run("stdio")


__all__ = ["build_server", "serve"]
