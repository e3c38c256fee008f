"""Which task an agent session works on: found, or started, and remembered.

The task of a session is, in this order:
1. `GIT_CKPT_TASK` in the agent's environment (it must exist, or it is started);
2. the task this session was seen with before (`.git/agent/sessions.json`);
3. the single active task of this worktree (active, or waiting for its recovery:
   recovering, not ready);
4. among several active tasks, the one named after the current branch;
5. with no active task, the task named after the branch (`detached-<sha>` on a
   detached HEAD): used when it exists, else started the way `git ckpt task
   start` starts one (the facade's `task_start`: contract checked, watched files
   recorded), with a goal saying so.
Several active tasks, none named after the branch: an error that says to set
`GIT_CKPT_TASK`.

`.git/agent/sessions.json` maps a session id to its agent and task (runtime
state of this worktree, never pushed), and says whether the session ended
(`ended`, set by SessionEnd, cleared by the next SessionStart): an agent
continued after a clean exit (`claude --continue`, `codex exec resume`) fires
SessionStart `resume` just as one restarted after a kill, and only the second
needs the five-step resume. The event log gets `session.start` and
`session.end` events too, so the audit trail names the sessions.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from git_agentckpt.errors import CkptError, UsageError
from git_agentckpt.lifecycle import PAUSED
from git_agentckpt.model import JSON
from git_agentckpt.store.reading import owner_of
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import current_state
from git_agentckpt.store.workspace import Workspace

SESSIONS_FILE = "sessions.json"
MAX_SESSIONS = 200  # the oldest are forgotten past this (their events stay in the log)


@dataclass(frozen=True)
class SessionTask:
    task: TaskName
    how: str  # env | session | active | branch | started
    # at a SessionStart: did the task's last session end cleanly (SessionEnd)?
    # None when no session of the task is known
    previous_ended: bool | None = None


def _path(ws: Workspace) -> str:
    from git_agentckpt.git.worktree import agent_dir

    return os.path.join(agent_dir(ws.repo), SESSIONS_FILE)


def read_sessions(ws: Workspace) -> dict[str, dict[str, JSON]]:
    try:
        with open(_path(ws), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    sessions = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(sessions, dict):
        return {}
    return {k: v for k, v in sessions.items() if isinstance(v, dict)}


def remember(
    ws: Workspace,
    session_id: str,
    agent: str,
    task: TaskName,
    source: str,
    ended: bool | None = None,
) -> None:
    """Record (or refresh) `session_id` -> `task`, under a lock (hooks may run at once).
    `ended` True marks the session ended (SessionEnd, or a Stop that let its turn end),
    False open again (SessionStart, a new turn's prompt), None leaves the mark as it was."""
    from git_agentckpt.git.files import write_if_changed
    from git_agentckpt.git.worktree import locked

    path = _path(ws)
    with locked(path + ".lock"):
        sessions = read_sessions(ws)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entry = sessions.pop(session_id, None) or {"first_seen": now}
        entry.update({"agent": agent, "task": task.name, "last_seen": now, "source": source})
        if ended is not None:
            entry["ended"] = now if ended else None
        sessions[session_id] = entry  # newest last
        while len(sessions) > MAX_SESSIONS:
            sessions.pop(next(iter(sessions)))
        write_if_changed(path, json.dumps({"v": 1, "sessions": sessions}, indent=1).encode())


def last_session_ended(ws: Workspace, task: TaskName) -> bool | None:
    """Whether the task's most recently seen session ended cleanly: a SessionEnd, or the
    Stop of its last turn with no turn begun since (Codex sends no SessionEnd). None: no
    session of the task is known."""
    mine = [e for e in read_sessions(ws).values() if e.get("task") == task.name]
    if not mine:
        return None
    return bool(mine[-1].get("ended"))


def branch_task_name(ws: Workspace) -> str:
    """The current branch's name (a valid task name: both follow check-ref-format), or
    `detached-<sha>`. HEAD is read as a file: no pygit2 call is needed for it."""
    try:
        with open(os.path.join(ws.repo.git_dir, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
    except OSError:
        head = ""
    if head.startswith("ref: refs/heads/"):
        return head[len("ref: refs/heads/") :]
    sha = ws.repo.head()
    return f"detached-{sha[:8]}" if sha else "agent-work"


def _active(ws: Workspace) -> list[str]:
    out = []
    for t in ws.tasks():
        with contextlib.suppress(CkptError):  # a damaged task does not stop the others
            state, _ = current_state(ws.store, ws.log, t)
            if (
                state is not None
                and state.get("status") in ("active", *PAUSED)
                and owner_of(state)["id"] == ws.worktree["id"]
            ):
                out.append(t.name)
    return out


def _exists(ws: Workspace, name: str) -> bool:
    t = TaskName(name)
    return ws.log.exists(t) or ws.store.tip(t) is not None


def _start(ws: Workspace, name: str, agent: str) -> SessionTask:
    goal = f"the work of {agent} sessions on {name} (task started by the {agent} hook)"
    ws.task_start(name, goal)  # the facade's task_start when ws is a Checkpointer
    return SessionTask(TaskName(name), "started")


def task_of_session(
    ws: Workspace, session_id: str | None, agent: str, env: Mapping[str, str]
) -> SessionTask:
    """The task this session works on (see the module docstring); may start one."""
    named = env.get("GIT_CKPT_TASK")
    if named:
        if _exists(ws, named):
            return SessionTask(TaskName(named), "env")
        return _start(ws, named, agent)
    if session_id:
        known = read_sessions(ws).get(session_id, {}).get("task")
        if isinstance(known, str) and _exists(ws, known):
            return SessionTask(TaskName(known), "session")
    active = _active(ws)
    if len(active) == 1:
        return SessionTask(TaskName(active[0]), "active")
    branch = branch_task_name(ws)
    if branch in active:
        return SessionTask(TaskName(branch), "branch")
    if active:
        raise UsageError(
            f"{len(active)} active tasks ({', '.join(active)}) and none is named after "
            f"the branch {branch}: which one is this session's?",
            hint="set GIT_CKPT_TASK in the agent's environment",
        )
    if _exists(ws, branch):
        return SessionTask(TaskName(branch), "branch")
    return _start(ws, branch, agent)
