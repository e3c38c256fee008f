"""`git ckpt import claude-code|codex FILE`: a past session's records as a task's events.

The file is parsed (`claude_transcript.py`, `codex_rollout.py`), the events the task's
log already holds are left out, and the rest are appended through
`Workspace.append_events` (the redaction gate), at most CHUNK events per commit.

Idempotent by record id. Each imported event names the records it stands for in
`actor.import` (`prompt:<record>`, `call:<tool id>` and `result:<tool id>`,
`model:<message id>`, `compact:<record>`, ...; the record of a Claude Code line is its
`uuid`, of a Codex line the digest of its bytes). Before appending, the task's log is
read back and the keys of that agent's events collected; an event whose keys are all
there is already imported. The refs are the only truth: nothing is cached beside them,
so a log rewound, fetched or merged is read as it is. Importing the same file again
adds nothing; importing it after the session grew adds only the new records; a tool
call imported before its result existed gets its result as a `tool.result` event.
What a hook logged during the session counts as imported too: a `tool.call` by its tool
id (`actor.call` or `data.tool_use_id`), a `user.prompt` by its `data.prompt_id`.

Two imports into one task run one after the other (a flock per task), so the second
sees what the first appended. A hook appending during an import takes no such lock: a
tool call it logs in that moment may be imported once more.

Cost: the read-back is one pass over the task's log (measured on a 20k-record
transcript: see README, "Auditing a session run without hooks").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from git_agentckpt.errors import UsageError
from git_agentckpt.integrations import claude_transcript, codex_rollout
from git_agentckpt.integrations.transcripts import (
    AGENTS,
    Line,
    Parsed,
    Proposed,
    Summarizer,
    read_lines,
)
from git_agentckpt.model import JSON, Event
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Workspace

__all__ = ["CHUNK", "ImportResult", "import_transcript", "imported_keys"]

CHUNK = 500  # events per commit: each commit is all-or-nothing; a rerun adds the rest
MAX_WARNINGS = 20  # malformed lines named one by one, then counted

NAMES = {"claude-code": "Claude Code transcript", "codex": "Codex rollout"}
PARSERS: dict[str, Callable[[Iterable[Line], Summarizer], Parsed]] = {
    "claude-code": claude_transcript.parse,
    "codex": codex_rollout.parse,
}
KINDS = ("prompt", "tool_call", "tool_result", "model_call", "compaction", "quota", "error")


@dataclass
class ImportResult:
    agent: str
    file: str
    task: str
    sessions: list[str]
    imported: dict[str, int] = field(default_factory=dict)  # kind -> events appended now
    already: int = 0  # events found in the log already
    malformed: int = 0  # lines skipped (not JSON objects)
    records: int = 0  # lines recognised as this agent's records
    dry_run: bool = False

    @property
    def events(self) -> int:
        return sum(self.imported.values())

    def to_json(self) -> dict[str, JSON]:
        return {
            "agent": self.agent,
            "file": self.file,
            "task": self.task,
            "sessions": list(self.sessions),
            "records": self.records,
            "imported": {k: self.imported.get(k, 0) for k in KINDS},
            "events": self.events,
            "already_imported": self.already,
            "malformed_lines": self.malformed,
            "dry_run": self.dry_run,
        }


def import_transcript(
    ws: Workspace, task: TaskName, agent: str, path: str, shown: str, dry_run: bool = False
) -> ImportResult:
    """Import `path` (named `shown` in messages) into `task`'s log; `dry_run`: count only."""
    if agent not in PARSERS:
        raise UsageError(f"unknown agent {agent!r}", hint=f"use one of: {', '.join(AGENTS)}")
    redactor = ws.log.redactor
    summarize = Summarizer(redactor.value)
    parsed = PARSERS[agent](read_lines(path, shown), summarize)
    _check_agent(parsed, agent, shown)
    for number, problem in parsed.malformed[:MAX_WARNINGS]:
        ws.store.warn(f"{shown}:{number}: skipped a line that is {problem}")
    if len(parsed.malformed) > MAX_WARNINGS:
        more = len(parsed.malformed) - MAX_WARNINGS
        ws.store.warn(f"{shown}: {more} more malformed lines skipped")
    with _import_lock(ws, task, dry_run):  # a second import waits, then sees the first's
        return _append_new(ws, task, agent, parsed, shown, summarize, dry_run)


@contextlib.contextmanager
def _import_lock(ws: Workspace, task: TaskName, dry_run: bool) -> Iterator[None]:
    """Imports into one task, one at a time (`agent/locks/<task>.import.flock` in the
    common git dir): the read-back and the append of one are never interleaved with
    another's. A dry run only reads: no lock."""
    if dry_run:
        yield
        return
    from git_agentckpt.git.worktree import locked

    name = task.name.replace("/", "%") + ".import.flock"
    with locked(os.path.join(ws.repo.common_dir, "agent", "locks", name)):
        yield


def _append_new(
    ws: Workspace,
    task: TaskName,
    agent: str,
    parsed: Parsed,
    shown: str,
    summarize: Summarizer,
    dry_run: bool,
) -> ImportResult:
    known = imported_keys(ws.log, task, agent)
    new, already = select(parsed.events, known, ws.log.redactor.text)
    result = ImportResult(
        agent,
        shown,
        task.name,
        parsed.sessions,
        already=already,
        malformed=len(parsed.malformed),
        records=parsed.recognised,
        dry_run=dry_run,
    )
    for ev in new:
        result.imported[ev.kind] = result.imported.get(ev.kind, 0) + 1
    if not dry_run:
        for start in range(0, len(new), CHUNK):
            chunk = new[start : start + CHUNK]
            ws.append_events(task.name, [ev.to_event(agent, summarize) for ev in chunk])
    return result


def _check_agent(parsed: Parsed, agent: str, shown: str) -> None:
    """A file with lines but none of them this agent's records is refused (exit 2)."""
    if parsed.recognised or not parsed.lines:
        return
    if parsed.other_agent:
        other = next(a for a in AGENTS if a != agent)
        raise UsageError(
            f"{shown} is a {NAMES[other]}, not a {NAMES[agent]}",
            hint=f"run `git ckpt import {other} {shown}`",
        )
    raise UsageError(
        f"{shown} is not a {NAMES[agent]}: none of its {parsed.lines} lines is a record of it",
        hint="give the session's .jsonl file (see `man git-ckpt`, import)",
    )


def imported_keys(log: EventLog, task: TaskName, agent: str) -> set[str]:
    """The record keys `agent`'s events in the task's log stand for (as stored: redacted),
    and `call:`/`result:` keys of the tool calls hooks logged (`actor.call`)."""
    keys: set[str] = set()
    if not log.exists(task):
        return keys
    for ev in log.iter_back(task):
        actor = ev.actor
        marks = actor.get("import")
        if isinstance(marks, list):
            if actor.get("agent") == agent:
                keys.update(k for k in marks if isinstance(k, str))
        else:
            keys.update(hook_keys(ev))
    return keys


def hook_keys(ev: Event) -> list[str]:
    """What an event a hook logged stands for: a tool call (`actor.call` or
    `data.tool_use_id`) with its result, a prompt (`data.prompt_id`, Claude Code's
    `promptId`)."""
    if ev.type == "tool.call":
        ids = (ev.actor.get("call"), ev.data.get("tool_use_id"))
        return [f"{k}:{i}" for i in ids if isinstance(i, str) and i for k in ("call", "result")]
    prompt = ev.data.get("prompt_id")
    if ev.type == "user.prompt" and isinstance(prompt, str) and prompt:
        return [f"promptid:{prompt}"]
    return []


def select(
    events: list[Proposed], known: set[str], redact: Callable[[str], str]
) -> tuple[list[Proposed], int]:
    """The events to append, and how many were imported already. A tool call imported
    before its result existed comes back as its `tool.result`. A record the file holds
    twice (a line copied again) is taken once."""
    new: list[Proposed] = []
    already = 0
    known = set(known)
    for ev in events:
        have = [redact(k) in known for k in ev.keys]
        if not any(have):
            new.append(ev)
        elif ev.kind == "tool_call" and have[0] and not all(have):
            new.append(late_result(ev))
        else:
            already += 1
            continue
        known.update(redact(k) for k in ev.keys)
    return new, already


def late_result(call: Proposed) -> Proposed:
    """The result part of a tool call whose call was imported before: a `tool.result`."""
    d = call.data
    data: dict[str, JSON] = {
        "at": d.get("result_at"),
        "record": d.get("result_record"),
        "line": d.get("result_line"),
        "tool": d.get("tool"),
        "status": d.get("status"),
        "message": f"{d.get('tool')} result: {d.get('status')}",
    }
    if "exit_code" in d:
        data["exit_code"] = d["exit_code"]
    keys = [k for k in call.keys if k.startswith("result:")]
    out = call.output
    return Proposed("tool_result", "tool.result", keys, call.session, call.call, None, out, data)
