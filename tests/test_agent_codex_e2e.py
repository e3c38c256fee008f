"""The real Codex CLI (pinned, installed by the test) inside a `git ckpt` task, against
a scripted OpenAI Responses server on 127.0.0.1 (issue 13, "What must be shown").

Set up with `git ckpt integrate codex` (and the repository trusted in config.toml, without
which Codex ignores a project's .codex/). Codex compacts inline for a provider of our
own: with `model_auto_compact_token_limit` in config.toml and a reply whose usage passes
it, the next `codex exec resume --last` first asks the model for a handoff summary
(PreCompact hook, trigger `auto`), then fires SessionStart (`resume`, then `compact`)
before its turn.

1. `codex exec`: the model starts step s1 (`exec_command` running `git ckpt step
   start`), writes notes/a.md with `apply_patch` (a freeform tool) and notes/x.txt with
   a shell redirection, finishes s1; its last reply reports 6000 tokens of context;
2. `codex exec resume --last`: the compaction request is held at the server while the
   test checks that a `pre_compact` checkpoint of notes/a.md exists; after it, the
   first request of the turn carries the SessionStart contexts with every constraint,
   the prose rules and the next step s2; the model does s2;
3. the event log holds a `tool.call` for every tool call Codex ran.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import (
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
from agent_install import CODEX, require
from agent_servers import Hold, Request, ResponsesServer, Text, ToolCall
from helpers import real_ckpt

RECORD_ENV = "AGENT_TRANSCRIPTS_DIR"  # set it to keep the session's rollout there
COMPACT_LIMIT = 5000


@pytest.fixture(scope="session")
def codex() -> Path:
    return require(CODEX).binary


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    started = Agents(tmp_path / "logs")
    yield started
    started.close()


def configure(codex_home: Path, repo: Path, server_url: str) -> None:
    """config.toml: our server as the model provider, compaction past COMPACT_LIMIT
    tokens, no sandbox (the hooks and `git ckpt` write .git), the repository trusted
    (Codex reads a project's .codex/ only then)."""
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f"""\
model = "gpt-5.5"
model_provider = "scripted"
model_auto_compact_token_limit = {COMPACT_LIMIT}
sandbox_mode = "danger-full-access"
approval_policy = "never"

[model_providers.scripted]
name = "scripted"
base_url = "{server_url}/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"

[projects."{repo}"]
trust_level = "trusted"
"""
    )


def integrate(repo: Path) -> None:
    """`git ckpt integrate codex`, as a user runs it: hooks calling
    `git ckpt hook codex EVENT` in .codex/hooks.json, the AGENTS.md block."""
    done = real_ckpt(repo, "integrate", "codex")
    assert done.returncode == 0, done.stderr
    hooks = json.loads((repo / ".codex" / "hooks.json").read_text())["hooks"]
    assert "git ckpt hook codex PreCompact" in json.dumps(hooks["PreCompact"])
    assert ".agent/contracts/" in (repo / "AGENTS.md").read_text()


def shell(cmd: str) -> ToolCall:
    # not a login shell: bash -l would reset PATH from /etc/profile and lose the
    # virtualenv's `git-ckpt`
    return ToolCall("exec_command", {"cmd": cmd, "login": False})


def add_file(path: str, step: str) -> ToolCall:
    lines = ["*** Begin Patch", f"*** Add File: {path}", f"+# {path}", f"+written in step {step}"]
    patch = "\n".join([*lines, "*** End Patch", ""])
    return ToolCall("apply_patch", patch)


def developer_texts(request: Request) -> list[str]:
    """The developer messages of a request, in order (Codex gives a SessionStart hook's
    additionalContext to the model as one)."""
    out = []
    for item in request.body.get("input") or []:
        if item.get("type") == "message" and item.get("role") == "developer":
            out += [str(p.get("text", "")) for p in item.get("content") or []]
    return out


def calls_run(requests: list[Request]) -> set[str]:
    """The ids of the tool calls Codex ran: each came back as an output item."""
    kinds = ("function_call_output", "custom_tool_call_output")
    return {
        str(item["call_id"])
        for request in requests
        for item in request.body.get("input") or []
        if item.get("type") in kinds
    }


def test_codex_session_compaction_and_brief(
    codex: Path, repo: Path, agents: Agents, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    make_task(repo)
    integrate(repo)
    codex_home = tmp_path / "codex-home"
    with ResponsesServer() as server:
        request.addfinalizer(lambda: server.dump(tmp_path / "requests"))
        configure(codex_home, repo, server.url)
        env = agent_env(CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="dummy")

        def run(*argv: str) -> Running:
            command = [str(codex), "exec", *argv[:-1], "--dangerously-bypass-hook-trust"]
            return agents.start([*command, argv[-1]], repo, env)

        # 1: step s1 through Codex's own tools; the last reply fills the context
        server.script(
            shell(f"git ckpt step start {TASK} s1"),
            add_file("notes/a.md", "s1"),
            shell("printf 'scratch\\n' > notes/x.txt"),
            shell(f"git ckpt step done {TASK} s1"),
            Text("s1 is done.", input_tokens=COMPACT_LIMIT + 1000),
        )
        assert run(f"Work on task {TASK}: do step s1.").wait().strip().endswith("s1 is done.")
        assert (repo / "notes" / "a.md").read_text() == "# notes/a.md\nwritten in step s1\n"
        assert (repo / "notes" / "x.txt").read_text() == "scratch\n"
        assert "git ckpt step start TASK STEP_ID" in server.requests[0].text  # AGENTS.md
        before = len(server.requests)

        # 2: resumed, Codex compacts first; held at the server: the checkpoint exists already
        held = Hold(Text("Handoff: s1 done (notes/a.md); next: s2."))
        server.script_compaction(held)
        server.script(
            shell(f"git ckpt step start {TASK} s2"),
            add_file("notes/b.md", "s2"),
            shell(f"git ckpt step done {TASK} s2"),
            Text("s2 is done."),
        )
        resumed = run("resume", "--last", "Continue the task.")
        assert held.held.wait(120), resumed.tail()
        taken = [c for c in checkpoints(repo) if c["trigger"] == "pre_compact"]
        held.release()
        assert len(taken) == 1, checkpoints(repo)
        assert "notes/a.md" in files_at(repo, taken[0]["commit"])
        first = server.wait_for(lambda r: r.kind == "turn", after=before)
        compaction = server.requests[before]
        assert compaction.kind == "compact" and first.index == before + 1  # the very next one
        briefs = [t for t in developer_texts(first) if "**Next step:**" in t]
        assert len(briefs) == 2, developer_texts(first)  # SessionStart resume, then compact
        for brief in briefs:
            assert_brief(brief, "s2")
            assert brief.startswith("[git ckpt brief: it replaces every earlier")  # issue 25
        assert resumed.wait().strip().endswith("s2 is done.")
        ran = calls_run(server.requests)

    events = event_log(repo)
    calls = [e for e in events if e["type"] == "tool.call"]
    logged = {str(e["data"].get("tool_use_id")) for e in calls}
    assert len(ran) == 7 and ran <= logged, (sorted(ran), sorted(logged), hooks_log(repo))
    sources = [e["data"]["source"] for e in events if e["type"] == "session.start"]
    assert sources == ["startup", "resume", "compact"]  # exec, then exec resume compacting
    patches = [e for e in calls if e["data"]["tool"] == "apply_patch"]
    assert ["notes/a.md" in str(e["input"]) for e in patches] == [True, False]
    # what each apply_patch wrote, read from its patch (issue 25, item 5)
    assert [list(e["data"].get("files") or {}) for e in patches] == [["notes/a.md"], ["notes/b.md"]]
    assert "notes/b.md" in str(patches[1]["input"])
    compacted = [e for e in events if e["type"] == "context.compacted"]
    assert compacted and compacted[0]["data"].get("trigger") == "auto", compacted
    state = task_state(repo)
    assert [s["status"] for s in state["steps"]] == ["done", "done", "pending"], state
    record_rollout(codex_home, "codex-rollout.jsonl")


def record_rollout(codex_home: Path, name: str) -> None:
    """With $AGENT_TRANSCRIPTS_DIR set, copy the session's rollout file there (the
    importer's fixtures are recorded this way)."""
    found = sorted((codex_home / "sessions").glob("*/*/*/rollout-*.jsonl"))
    assert len(found) == 1, found  # `exec resume --last` appends to the session's file
    where = os.environ.get(RECORD_ENV)
    if where:
        shutil.copyfile(found[0], Path(where) / name)
