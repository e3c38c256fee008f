"""`git ckpt hook claude-code|codex EVENT`: one agent hook call, answered in the hook's format.

Claude Code and Codex run a command at each moment of a session and give it a
JSON object on stdin; what the command prints on stdout (one JSON object) is
read back. `answer` turns one call into a `HookReply`: the JSON to print, and
one line for `.git/agent/hooks.log`. It never raises and never blocks the agent
with an error: a failure (not a repository, stdin that is not JSON, a locked
ref, an unknown task) is answered with `{"systemMessage": "git ckpt hook: …"}`
(shown to the person, not to the model), exit status 0, and logged.

What each event does (the same for both agents; Codex sends Claude Code's
shapes):

- SessionStart: find or start the session's task (`sessions.py`) and log
  `session.start`; for `source` `compact`, the recovery brief of the recorded
  state; for `resume`, the five-step resume (`hook_resume.py`) when the
  task's last session did not end (killed, crashed), and only the brief when
  it ended cleanly (`claude --continue` and `codex exec resume` fire `resume`
  too); for any source, when the task waits for its recovery (recovering, not
  ready), what it waits for; all as `hookSpecificOutput.additionalContext`, each
  saying it replaces every earlier brief (the agents replay them all).
- PreCompact: a full checkpoint, trigger `pre_compact`.
- PostToolUse / PostToolUseFailure: a `tool.call` event (input and response
  summarised, `summary.py`; a file tool's with the files it wrote and their
  sha256, `own_writes.py`), then the trigger policy (`tick`) with the context
  size read from the transcript's tail (`transcript_usage.py`).
- UserPromptSubmit: a `user.prompt` event.
- Stop: a full checkpoint (trigger `turn_end`: with only a light one, every
  file a finished turn wrote would read as drift after a kill in a later
  turn; none while the task waits for its recovery, and the person is told why
  in a `systemMessage`), then every constraint (`check`); a failing `block`
  constraint is returned to the model as `{"decision": "block", "reason": …}`,
  which makes it continue, unless `stop_hook_active` (it continues already
  because of a Stop hook): then the person is told (`systemMessage`) and the
  agent stops, so it never loops.
- StopFailure: a full checkpoint and a `quota` event (error `rate_limit` or
  `billing_error`; trigger `quota`) or an `error` event (any other error,
  trigger `error`), carrying the error.
- SessionEnd, PostCompact: an event (`session.end`, `context.compacted`).
- Any other event: nothing (`{}`), not even a task lookup.

A checkpoint the policy or Stop wants while the task is `recovering` (resumed,
not yet confirmed) is not taken and said in the log; PreCompact and StopFailure
checkpoints are taken all the same (`force`): they protect work about to be
lost, like the forced rules of the policy.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from git_agentckpt.errors import CkptError, TaskPaused
from git_agentckpt.integrations.sessions import (
    SessionTask,
    last_session_ended,
    remember,
    task_of_session,
)
from git_agentckpt.integrations.summary import cut_text, summarise
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

AGENTS = ("claude-code", "codex")
LOG_FILE = "hooks.log"
LOG_MAX_BYTES = 1 << 20  # then hooks.log becomes hooks.log.1 (one generation kept)
QUOTA_ERRORS = ("rate_limit", "billing_error")
DEFAULT_CONTEXT_WINDOW = 200_000  # Claude Code's transcripts do not say; GIT_CKPT_CONTEXT_WINDOW
MAX_STDIN = 64 << 20  # bytes of a hook's stdin read at most: answered within its timeout


@dataclass(frozen=True)
class HookCall:
    agent: str
    event: str
    payload: dict[str, Any]
    env: Mapping[str, str]

    @property
    def session_id(self) -> str | None:
        sid = self.payload.get("session_id")
        return sid if isinstance(sid, str) and sid else None

    def text(self, key: str) -> str | None:
        value = self.payload.get(key)
        return value if isinstance(value, str) else None

    def actor(self) -> dict[str, JSON]:
        who: dict[str, JSON] = {"agent": self.agent}
        if self.session_id:
            who["session"] = self.session_id
        return who


@dataclass
class HookReply:
    output: dict[str, JSON]  # printed on stdout as one JSON object
    outcome: str  # one line for hooks.log
    task: str | None = None

    @property
    def text(self) -> str:
        return json.dumps(self.output, ensure_ascii=False, separators=(",", ":"))


def failed(message: str) -> HookReply:
    return HookReply({"systemMessage": f"git ckpt hook: {message}"}, f"error: {message}")


def parse_call(agent: str, event: str, stdin: bytes, env: Mapping[str, str]) -> HookCall:
    """The call: the event named on the command line, else the payload's
    `hook_event_name`. Raises ValueError on input that is not a JSON object."""
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r} (one of {', '.join(AGENTS)})")
    if len(stdin) > MAX_STDIN:
        raise ValueError(f"the hook's stdin holds more than {MAX_STDIN >> 20} MiB: not read")
    try:
        payload = json.loads(stdin.decode("utf-8")) if stdin.strip() else {}
    except UnicodeDecodeError as exc:
        raise ValueError(f"the hook's stdin is not UTF-8 (offset {exc.start})") from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"the hook's stdin is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise ValueError("the hook's stdin is not a JSON object")
    named = payload.get("hook_event_name")
    event = event or (named if isinstance(named, str) else "")
    if not event:
        raise ValueError("no event named (`git ckpt hook AGENT EVENT`) nor in the payload")
    return HookCall(agent, event, payload, env)


def answer(
    open_ws: Callable[[], Workspace],
    agent: str,
    event: str,
    stdin: bytes,
    env: Mapping[str, str],
) -> HookReply:
    """One hook call, answered; never raises (but KeyboardInterrupt and SystemExit)."""
    started = time.perf_counter()
    ws: Workspace | None = None
    try:
        ws = open_ws()
        call = parse_call(agent, event, stdin, env)
        event = call.event
        reply = dispatch(ws, call)
    except ValueError as exc:
        reply = failed(str(exc))
    except CkptError as exc:
        reply = failed(exc.one_line())
    except Exception as exc:  # a hook never shows the agent a traceback
        reply = failed(f"internal error: {type(exc).__name__}: {exc}")
    if ws is not None:
        log_call(ws, agent, event, reply, (time.perf_counter() - started) * 1000)
    return reply


def log_call(ws: Workspace, agent: str, event: str, reply: HookReply, ms: float) -> None:
    """One line in `.git/agent/hooks.log`: time, agent, event, task, outcome, ms (tabs)."""
    from git_agentckpt.git.worktree import agent_dir

    try:
        path = os.path.join(agent_dir(ws.repo), LOG_FILE)
        if os.path.exists(path) and os.path.getsize(path) > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        outcome = " ".join(cut_text(reply.outcome, 400).split())
        fields = [now, agent, event or "-", reply.task or "-", outcome, f"{ms:.0f}ms"]
        line = "\t".join(" ".join(f.split()) for f in fields) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass  # the log is for people; a hook never fails for it


def dispatch(ws: Workspace, call: HookCall) -> HookReply:
    handler = HANDLERS.get(call.event)
    if handler is None:
        return HookReply({}, "ignored: not an event git ckpt acts on")
    found = task_of_session(ws, call.session_id, call.agent, call.env)
    source = call.text("source") or call.event
    if call.event == "SessionStart":
        found = replace(found, previous_ended=last_session_ended(ws, found.task))
        if call.session_id:
            remember(ws, call.session_id, call.agent, found.task, source, ended=False)
    elif call.event == "SessionEnd" and call.session_id:
        remember(ws, call.session_id, call.agent, found.task, source, ended=True)
    elif call.event == "UserPromptSubmit" and call.session_id:  # a turn begins: not ended
        remember(ws, call.session_id, call.agent, found.task, source, ended=False)
    elif call.session_id and found.how != "session":
        remember(ws, call.session_id, call.agent, found.task, source)
    reply = handler(ws, call, found)
    reply.task = found.task.name
    if call.event == "Stop" and call.session_id and reply.output.get("decision") != "block":
        # the turn ended and the agent may stop: all it wrote is in the Stop checkpoint.
        # Codex sends no SessionEnd: its clean exit is the Stop of its last turn; a kill
        # comes between a turn's prompt and its Stop
        remember(ws, call.session_id, call.agent, found.task, source, ended=True)
    return reply


# -- the events ------------------------------------------------------------------------


def session_start(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    from git_agentckpt.integrations.hook_resume import REPLACES, brief_context, resume_context

    source = call.text("source") or "startup"
    data: dict[str, JSON] = {"source": source, "task_from": found.how}
    for key in ("session_id", "transcript_path", "model", "context_tokens"):
        if isinstance(call.payload.get(key), str | int):
            data[key] = call.payload[key]
    ws.append_events(found.task.name, [NewEvent("session.start", call.actor(), data=data)])
    if source not in ("compact", "resume") and not _waits(ws, found.task):
        return HookReply({}, f"session recorded ({source}, task {found.how})")
    output: dict[str, JSON] = {}
    try:
        if source not in ("compact", "resume"):  # a new session of a task that waits
            context, outcome = brief_context(ws, found.task, f"this session starts ({source})")
        elif source == "compact":
            context, outcome = brief_context(ws, found.task, "the context was compacted")
        elif found.previous_ended:  # continued after a clean exit: nothing to recover
            context, outcome = brief_context(
                ws, found.task, "this session continues one that ended cleanly"
            )
            outcome = "continued: " + outcome
        else:
            context, outcome = resume_context(ws, found.task)
    except CkptError as exc:  # the model still learns where its rules are
        context = (
            f"git ckpt could not give the recovery brief of task {found.task}: "
            f"{exc.one_line()}. The project's constraints are in .agent/contracts/: read "
            f"them before you go on; `git ckpt resume {found.task} --brief-only` prints "
            "the brief."
        )
        outcome = f"error: {exc.one_line()}"
        output["systemMessage"] = f"git ckpt hook: {exc.one_line()}"
    context = f"{REPLACES}\n{context}"
    output["hookSpecificOutput"] = {"hookEventName": "SessionStart", "additionalContext": context}
    return HookReply(output, f"{source}: {outcome} ({len(context)} characters)")


def _waits(ws: Workspace, task: TaskName) -> bool:
    """Whether the task waits for its recovery (recovering, not ready)."""
    from git_agentckpt.lifecycle import PAUSED
    from git_agentckpt.store.state import current_state

    state, _ = current_state(ws.store, ws.log, task)
    return state is not None and state.get("status") in PAUSED


def pre_compact(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    trigger = call.text("trigger") or "auto"
    try:
        made = ws.create(
            found.task.name,
            message=f"before a {trigger} compaction ({call.agent})",
            trigger="pre_compact",
            force=True,  # the context is about to be cut: protect the work while recovering
            actor=call.agent,
        )
    except TaskPaused as paused:  # not ready: nothing records the drift a person decides on
        return HookReply({}, f"no checkpoint: the task is {paused.status}")
    return HookReply({}, f"checkpoint {made.id} (full, pre_compact)")


def tool_call_event(call: HookCall, redact: Callable[[Any], Any], workdir: str) -> NewEvent:
    """The `tool.call` event; a file tool's with the files it wrote in `workdir`."""
    from git_agentckpt.integrations.own_writes import files_written

    failed_call = call.event == "PostToolUseFailure"
    data: dict[str, JSON] = {
        "tool": call.text("tool_name") or "?",
        "status": "failed" if failed_call else "ok",
    }
    for key in ("tool_use_id", "duration_ms", "turn_id"):
        if isinstance(call.payload.get(key), str | int):
            data[key] = call.payload[key]
    tool_input = call.payload.get("tool_input")
    files = files_written(str(data["tool"]), tool_input, call.text("cwd") or "", workdir)
    if files:
        data["files"] = files
    response = call.payload.get("tool_response")
    if failed_call:
        response = call.payload.get("error", response)
    return NewEvent(
        "tool.call",
        call.actor(),
        input=summarise(tool_input, redact=redact),
        output=summarise(response, redact=redact),
        data=data,
    )


def context_signals(call: HookCall) -> dict[str, Any]:
    """tokens_used / token_budget for the policy: the context's size and its window."""
    from git_agentckpt.integrations.transcript_usage import last_usage

    usage = last_usage(call.text("transcript_path"), call.agent)
    if usage is None or usage.tokens == 0:
        return {}
    window = usage.window
    if window is None:
        try:
            window = int(call.env.get("GIT_CKPT_CONTEXT_WINDOW") or DEFAULT_CONTEXT_WINDOW)
        except ValueError:
            window = DEFAULT_CONTEXT_WINDOW
    if window <= 0 or usage.tokens >= window:  # a larger window than we know: size only
        return {"tokens_used": usage.tokens}
    return {"tokens_used": usage.tokens, "token_budget": window}


def post_tool_use(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    from git_agentckpt.tick import tick
    from git_agentckpt.triggers import Signals

    task = found.task.name
    ws.append_events(task, [tool_call_event(call, ws.log.redactor.value, ws.repo.workdir)])
    signals = context_signals(call)
    outcome = f"tool.call {call.text('tool_name') or '?'}"
    try:
        result = tick(ws, task, Signals(now=time.time(), **signals), set(signals))
    except TaskPaused as paused:
        return HookReply({}, f"{outcome}; no checkpoint: the task is {paused.status}")
    made = result.checkpoint
    tokens = f", context {signals['tokens_used']} tokens" if signals else ""
    taken = f" checkpoint {made.id}" if made else ""
    return HookReply({}, f"{outcome}; tick {result.decision.tier}{taken}{tokens}")


def user_prompt(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    data: dict[str, JSON] = {}
    for key in ("permission_mode", "turn_id", "prompt_id"):
        if isinstance(call.payload.get(key), str):
            data[key] = call.payload[key]
    prompt = summarise(call.text("prompt"), redact=ws.log.redactor.value)
    event = NewEvent("user.prompt", call.actor(), input=prompt, data=data)
    ws.append_events(found.task.name, [event])
    return HookReply({}, "user.prompt")


def stop(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    from git_agentckpt.contracts.engine import run_check_now

    task = found.task.name
    scanned: str | None = None  # the tree the checkpoint just read from the disk
    try:
        made = ws.create(
            task,
            message=f"end of a turn ({call.agent})",
            trigger="turn_end",
            actor=call.agent,
        )
        outcome = f"checkpoint {made.id} ({made.kind}, turn_end)"
        scanned = made.tree if made.kind == "full" else None
        waiting: dict[str, JSON] = {}
    except TaskPaused as paused:  # the person learns why nothing of this turn is recorded
        outcome = f"no checkpoint: the task is {paused.status}"
        waiting = {"systemMessage": f"git ckpt: no checkpoint of this turn: {paused.one_line()}"}
    checked = run_check_now(ws, task, scanned)
    blocking = [r for r in checked.report.results if r.blocking]
    if not blocking:
        return HookReply(waiting, f"{outcome}; check passed")
    lines = [f"- {r.id} ({r.status}): {r.text} — {r.detail}" for r in blocking]
    ids = ", ".join(r.id for r in blocking)
    if call.payload.get("stop_hook_active") is True:
        message = (
            f"git ckpt: block constraint(s) {ids} still fail after the agent was sent back "
            f"once; it stops now. See `git ckpt check {task}`."
        )
        said = f"{outcome}; still failing: {ids}; not sent back"
        return HookReply({"systemMessage": message}, said)
    reason = (
        f"git ckpt: task {task}: these `block` constraints fail now (.agent/contracts/):\n"
        + "\n".join(lines)
        + f"\nFix them before you stop, then check with `git ckpt check {task}`."
    )
    return HookReply({"decision": "block", "reason": reason}, f"{outcome}; block: {ids}")


def stop_failure(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    data: dict[str, JSON] = {"source": f"{call.agent} StopFailure"}
    for key in ("error_details", "error_message", "last_assistant_message"):
        if call.payload.get(key) is not None:
            data[key] = summarise(call.payload[key], 2048)
    return _stopped_on_error(ws, call, found, call.text("error") or "unknown", data)


def _stopped_on_error(
    ws: Workspace, call: HookCall, found: SessionTask, error: str, data: dict[str, JSON]
) -> HookReply:
    """A `quota` (or `error`) event carrying the error, and a full checkpoint."""
    kind = "quota" if error in QUOTA_ERRORS else "error"
    task = found.task.name
    ws.append_events(task, [NewEvent(kind, call.actor(), data={"error": error, **data})])
    try:
        made = ws.create(
            task,
            message=f"the session stopped: {error} ({call.agent})",
            trigger=kind,
            force=True,
            actor=call.agent,
        )
    except TaskPaused as paused:
        return HookReply({}, f"{kind} event ({error}); no checkpoint: the task is {paused.status}")
    return HookReply({}, f"{kind} event ({error}); checkpoint {made.id} (full, {kind})")


def session_end(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
    """`session.end`; and when the session ended on an API error that no StopFailure hook
    reported (`claude -p` hit by a usage limit fires only SessionEnd), the same quota
    event and checkpoint as StopFailure, read from the transcript's last answer."""
    from git_agentckpt.integrations.transcript_usage import last_api_error

    data: dict[str, JSON] = {}
    if call.payload.get("reason") is not None:
        data["reason"] = summarise(call.payload["reason"], 2048)
    ws.append_events(found.task.name, [NewEvent("session.end", call.actor(), data=data)])
    failed = last_api_error(call.text("transcript_path")) if call.agent == "claude-code" else None
    if failed is None or _reported_already(ws, call, found):
        return HookReply({}, "session.end")
    said: dict[str, JSON] = {
        "source": f"{call.agent} transcript (SessionEnd)",
        "error_message": failed.message,
    }
    if failed.status is not None:
        said["status"] = failed.status
    reply = _stopped_on_error(ws, call, found, failed.error, said)
    reply.outcome = "session.end; " + reply.outcome
    return reply


def _reported_already(ws: Workspace, call: HookCall, found: SessionTask) -> bool:
    """Whether a StopFailure of this session logged its error since its last start."""
    for event in reversed(ws.events(found.task.name, limit=20)):
        if event.type == "session.start" and event.actor.get("session") == call.session_id:
            return False
        if event.type in ("quota", "error") and event.actor.get("session") == call.session_id:
            return True
    return False


Handler = Callable[[Workspace, HookCall, SessionTask], HookReply]


def noted(type_: str, keys: tuple[str, ...]) -> Handler:
    def handle(ws: Workspace, call: HookCall, found: SessionTask) -> HookReply:
        data: dict[str, JSON] = {}
        for key in keys:
            if call.payload.get(key) is not None:
                data[key] = summarise(call.payload[key], 4096)
        ws.append_events(found.task.name, [NewEvent(type_, call.actor(), data=data)])
        return HookReply({}, type_)

    return handle


HANDLERS: dict[str, Handler] = {
    "SessionStart": session_start,
    "PreCompact": pre_compact,
    "PostToolUse": post_tool_use,
    "PostToolUseFailure": post_tool_use,
    "UserPromptSubmit": user_prompt,
    "Stop": stop,
    "StopFailure": stop_failure,
    "SessionEnd": session_end,
    "PostCompact": noted("context.compacted", ("trigger", "compact_summary")),
}
