"""The real Claude Code binary (pinned, installed by the test) inside a `git ckpt` task,
against a scripted Anthropic Messages server on 127.0.0.1 (issue 13, "What must be
shown").

Set up with `git ckpt integrate claude-code`, one session of five `claude -p` runs in
a repository with a task and its contract:
1. the model starts step s1 (`git ckpt step start` through Bash), writes notes/a.md
   (Write), finishes s1; 2. `--continue`: the same for s2 and notes/b.md;
3. `claude -p /compact --continue`: the compaction is held at the model server while
   the test checks that a `pre_compact` checkpoint of notes/b.md exists already;
4. `--continue`: the first request after the compaction carries, in its system prompt,
   the brief from the SessionStart(compact) hook: every constraint, the prose rules and
   the next step s3. The model starts s3 and writes notes/c.md; while the server holds
   the next reply, the agent's process group is SIGKILLed;
5. a restart with `--continue`: SessionStart(resume) injects the brief into the first
   request. Finally the event log holds a `tool.call` for every tool call the agent made.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_harness import (
    PROSE,
    TASK,
    Agents,
    Running,
    agent_env,
    assert_brief,
    checkpoints,
    event_log,
    files_at,
    hooks_log,
    make_task,
    task_state,
)
from agent_install import CLAUDE, require
from agent_servers import AnthropicServer, Hold, Request, Text, ToolCall
from helpers import real_ckpt

RECORD_ENV = "AGENT_TRANSCRIPTS_DIR"  # set it to keep the session's transcript there
CONTEXT_MARK = "SessionStart hook additional context:"


@pytest.fixture(scope="session")
def claude() -> Path:
    return require(CLAUDE).binary


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    started = Agents(tmp_path / "logs")
    yield started
    started.close()


def integrate(repo: Path) -> None:
    """`git ckpt integrate claude-code`, as a user runs it: hooks calling
    `git ckpt hook claude-code EVENT` in .claude/settings.json, the CLAUDE.md block."""
    done = real_ckpt(repo, "integrate", "claude-code")
    assert done.returncode == 0, done.stderr
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    assert "git ckpt hook claude-code PreCompact" in json.dumps(hooks["PreCompact"])
    assert "@.agent/contracts/constraints.md" in (repo / "CLAUDE.md").read_text()


def claude_env(server: AnthropicServer) -> dict[str, str]:
    return agent_env(
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY="dummy",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
    )


def runner(claude: Path, repo: Path, agents: Agents, env: dict[str, str]) -> Callable[..., Running]:
    """`claude -p PROMPT [MORE…]` in `repo`, allowed to use Write and Bash (as root,
    Claude Code refuses bypassPermissions)."""

    def run(prompt: str, *more: str) -> Running:
        argv = [str(claude), "-p", prompt, *more, "--output-format", "json"]
        argv += ["--permission-mode", "acceptEdits", "--allowedTools", "Write", "Bash"]
        return agents.start(argv, repo, env)

    return run


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": command})


def write_note(repo: Path, name: str, step: str) -> ToolCall:
    content = f"# {name}\n\nwritten in step {step}\n"
    return ToolCall("Write", {"file_path": str(repo / "notes" / name), "content": content})


def step_turn(repo: Path, step: str, note: str) -> list[ToolCall]:
    return [
        bash(f"git ckpt step start {TASK} {step}"),
        write_note(repo, note, step),
        bash(f"git ckpt step done {TASK} {step}"),
    ]


def hook_contexts(request: Request) -> list[str]:
    """The SessionStart contexts of a request, oldest first: Claude Code puts them in
    the last `system` message, each after CONTEXT_MARK (a compaction's context, kept
    in the transcript, before the resume's of the running session)."""
    last = ""
    for message in request.body.get("messages", []):
        content = message.get("content")
        blocks = [{"text": content}] if isinstance(content, str) else content or []
        texts = [str(block.get("text", "")) for block in blocks]
        if message.get("role") == "system" and any(CONTEXT_MARK in t for t in texts):
            last = "\n".join(texts)
    return [part.strip() for part in last.split(CONTEXT_MARK)[1:]]


def tool_results(requests: list[Request]) -> set[str]:
    """The ids of the tool calls the agent ran: each came back as a tool_result."""
    ids = set()
    for request in requests:
        for message in request.body.get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    ids.add(str(block["tool_use_id"]))
    return ids


def test_claude_code_session_compaction_kill_and_resume(
    claude: Path, repo: Path, agents: Agents, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    make_task(repo)
    integrate(repo)
    with AnthropicServer() as server:
        request.addfinalizer(lambda: server.dump(tmp_path / "requests"))
        env = claude_env(server)
        run = runner(claude, repo, agents, env)

        # turns 1 and 2: a step each, through the agent's own tools
        server.script(*step_turn(repo, "s1", "a.md"), Text("s1 is done."))
        result = json.loads(run(f"Work on task {TASK}: do step s1.").wait())
        assert result["is_error"] is False, result
        assert PROSE.rstrip("\n") in server.requests[0].text  # CLAUDE.md imported the rules
        server.script(*step_turn(repo, "s2", "b.md"), Text("s2 is done."))
        run("Now do step s2.", "--continue").wait()
        state = task_state(repo)
        assert [s["status"] for s in state["steps"]] == ["done", "done", "pending"], state

        # 3: /compact, held at the server: the pre_compact checkpoint exists already
        held = Hold(Text(server.summary))
        server.script_compaction(held)
        compacting = run("/compact", "--continue")
        assert held.held.wait(120), compacting.tail()
        before = [c for c in checkpoints(repo) if c["trigger"] == "pre_compact"]
        held.release()
        compacting.wait()
        assert len(before) == 1, checkpoints(repo)
        assert "notes/b.md" in files_at(repo, before[0]["commit"])
        after_compaction = len(server.requests)

        # 4: the next request carries the compact brief in its system prompt; killed mid-turn
        stuck = Hold(Text("s3 is done."))
        server.script(bash(f"git ckpt step start {TASK} s3"), write_note(repo, "c.md", "s3"), stuck)
        killed = run("Continue the task.", "--continue")
        first = server.wait_for(lambda r: r.kind == "turn", after=after_compaction)
        assert first.index == after_compaction  # the very next request the model gets
        contexts = hook_contexts(first)
        # SessionStart of the /compact run (resume), of its compaction (compact), of this run
        assert len(contexts) == 3, contexts
        for context in contexts:
            assert_brief(context, "s3")
        assert stuck.held.wait(120), killed.tail()
        killed.kill()
        assert killed.proc.returncode == -9
        assert (repo / "notes" / "c.md").exists()
        after_kill = len(server.requests)

        # 5: restarted: SessionStart(resume) gives the brief in the first request
        server.script(Text("Resumed."))
        run("Continue the task.", "--continue").wait()
        restarted = server.wait_for(lambda r: r.kind == "turn", after=after_kill)
        assert restarted.index == after_kill
        contexts = hook_contexts(restarted)
        assert contexts, json.dumps(restarted.body)[-3000:]
        assert_brief(contexts[-1], "s3")  # this session's, from SessionStart(resume)
        # the killed turn's own logged Write: kept and named, no drift (issue 25, item 5)
        assert "- `notes/c.md`: kept (own logged write)" in contexts[-1]
        assert "NOT resumed" not in contexts[-1] and task_state(repo)["status"] == "recovering"
        # every replayed brief says the newest replaces it (issue 25, item 7)
        assert all(c.startswith("[git ckpt brief: it replaces every earlier") for c in contexts)
        ran = tool_results(server.requests)

    # the event log holds every tool call the agent ran (ids as Claude Code gave them)
    events = event_log(repo)
    calls = [e for e in events if e["type"] == "tool.call"]
    logged = {str(e["data"].get("tool_use_id")) for e in calls}
    assert ran and ran <= logged, (sorted(ran), sorted(logged), hooks_log(repo))
    assert len(ran) == 8  # 3 + 3 before the compaction, 2 after; the held reply never ran
    sources = [e["data"]["source"] for e in events if e["type"] == "session.start"]
    # every `claude -p --continue` starts with SessionStart(resume); /compact adds compact
    assert sources == ["startup", "resume", "resume", "compact", "resume", "resume"]
    writes = [e for e in calls if e["data"]["tool"] == "Write"]
    assert [json_of(e["input"])["file_path"] for e in writes] == [
        str(repo / "notes" / n) for n in ("a.md", "b.md", "c.md")
    ]
    assert [list(e["data"]["files"]) for e in writes] == [
        ["notes/a.md"],
        ["notes/b.md"],
        ["notes/c.md"],
    ]
    record_transcript(Path(env["HOME"]), "claude-code-session.jsonl")


def json_of(value: Any) -> dict[str, Any]:
    """A summarised tool input: a JSON object, or its text."""
    if isinstance(value, dict):
        return value
    parsed = json.loads(str(value))
    assert isinstance(parsed, dict)
    return parsed


def record_transcript(home: Path, name: str) -> None:
    """With $AGENT_TRANSCRIPTS_DIR set, copy the session's transcript there (the
    importer's fixtures are recorded this way)."""
    where = os.environ.get(RECORD_ENV)
    found = sorted(
        (home / ".claude" / "projects").glob("*/*.jsonl"), key=lambda p: p.stat().st_size
    )
    assert found, "Claude Code wrote no transcript"
    if where:
        shutil.copyfile(found[-1], Path(where) / name)  # the session's (the largest) file


def tool_errors(requests: list[Request]) -> dict[str, str]:
    """The tool results Claude Code marked as errors, by tool call id."""
    out = {}
    for request in requests:
        for message in request.body.get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block.get("is_error"):
                    out[str(block["tool_use_id"])] = json.dumps(block.get("content"))
    return out


def test_a_continued_turn_keeps_the_task_working(
    claude: Path, repo: Path, agents: Agents, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A second turn (`--continue` after a clean end) can move its step, and its turn
    ends with a checkpoint, as the first turn's did."""
    make_task(repo)
    integrate(repo)
    with AnthropicServer() as server:
        request.addfinalizer(lambda: server.dump(tmp_path / "requests"))
        run = runner(claude, repo, agents, claude_env(server))
        server.script(*step_turn(repo, "s1", "a.md"), Text("s1 is done."))
        run(f"Work on task {TASK}: do step s1.").wait()
        server.script(bash(f"git ckpt step start {TASK} s2"), Text("s2 started."))
        run("Now start step s2.", "--continue").wait()
        errors = tool_errors(server.requests)
    assert task_state(repo)["current_step"] == "s2"
    assert errors == {}, errors
    turn_ends = [c for c in checkpoints(repo) if c["trigger"] == "turn_end"]
    assert len(turn_ends) == 2, hooks_log(repo)
