"""`git ckpt mcp` (issue 13): the installed `git-ckpt` started as a subprocess in a real
repository, driven by the `mcp` SDK's own client over stdio, in both protocol eras
(the `initialize` handshake and 2026-07-28 `server/discover`). Every tool, the prompt and
the resources are called and their content checked against the store (`git ckpt log`,
`task show`); errors come back as tool errors and the server keeps answering. The warm
daemon never serves `mcp`, and no other command imports the SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import git
from daemon_helpers import GIT_CKPT, ok, serving, status
from helpers import ckpt, ckpt_json, write
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import CallToolResult, TextContent, TextResourceContents
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from git_agentckpt.daemon import client as launch
from git_agentckpt.daemon import find as daemon_find

CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: api-frozen
    text: Do not modify the public API under src/api
    severity: block
"""
RESTATEMENT = """Goal: reproduce table 2 of the paper.
Constraints: seed42 - experiments use seed 42; api-frozen - the public API under src/api stays.
s1 is done and not to be redone.
Next step: s2
"""
SECRET = "sk-" + "ant-" + "api03-" + "Ab9_cD8-" * 11 + "AA"
TOOLS = {
    "checkpoint_create",
    "step_start",
    "step_done",
    "event_append",
    "check_constraints",
    "resume",
    "confirm",
    "task_status",
}


def research_task(repo: Path) -> None:
    """Task t: three steps, two constraints from the contract (one checked by a rule)."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    ckpt(repo, "task", "start", "t", "--goal", "Reproduce table 2 of the paper",
         "--step", "s1:read", "--step", "s2:train", "--step", "s3:report",
         "--constraint", "seed42", "--constraint", "api-frozen")  # fmt: skip


def server(repo: Path) -> StdioServerParameters:
    """`git ckpt mcp` as an agent starts it: the installed script, in the repository."""
    return StdioServerParameters(
        command=GIT_CKPT, args=["mcp"], cwd=str(repo), env=dict(os.environ)
    )


def talk(repo: Path, mode: str, script: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(120):  # a hung server fails the test instead of hanging it
            async with Client(server(repo), mode=mode) as client:
                await script(client)

    anyio.run(main)


def text(result: CallToolResult) -> str:
    assert all(isinstance(c, TextContent) for c in result.content)
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def call(client: Client, tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
    """A tool call that must succeed: its text and its structured content."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {text(result)}"
    assert result.structured_content is not None
    return text(result), result.structured_content


async def fails(client: Client, tool: str, **args: Any) -> str:
    """A tool call that must fail as a tool error: its one line."""
    result = await client.call_tool(tool, args)
    assert result.is_error, text(result)
    line = text(result)
    assert "\n" not in line and "Traceback" not in line, line
    return line


def log(repo: Path) -> list[dict[str, Any]]:
    out = ckpt(repo, "log", "t", "--json").stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_every_tool_prompt_and_resource_through_the_sdk_client(repo: Path, mode: str) -> None:
    research_task(repo)

    async def script(client: Client) -> None:
        if mode == "legacy":  # the initialize handshake, at the newest version it has
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        else:  # server/discover: stateless, a version in every request's _meta
            assert client.protocol_version == mode
        assert client.server_info is None or client.server_info.name == "git-ckpt"
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        assert all(len(t.description or "") > 80 for t in tools)  # written for a model

        said, state = await call(client, "task_status")
        assert "task t is active" in said and "next step: s1" in said
        assert state["constraints"] == ["seed42", "api-frozen"]

        said, ev = await call(client, "step_start", step_id="s1", risk="high")
        assert "s1 of task t: start" in said and "taken first" in said and "step_done" in said
        assert ev["type"] == "step.start" and ev["data"]["risk"] == "high"

        said, ev = await call(
            client, "event_append", type="tool.call",
            data={"input": {"cmd": "fetch papers"}, "output": "2 papers", "key": SECRET},
        )  # fmt: skip
        assert f"#{ev['seq']} (tool.call)" in said

        said, made = await call(client, "step_done", step_id="s1", outputs={"papers": 2})
        assert f"checkpoint {made['id']}" in said and "next step: s2" in said

        said, state = await call(client, "task_status", task="t")
        assert "[done] s1: read" in said and "next step: s2" in said
        assert [s["status"] for s in state["steps"]] == ["done", "pending", "pending"]

        said, made = await call(client, "checkpoint_create", message="before s2", light=True)
        assert said == f"checkpoint {made['id']} of task t (light)"

        said, checked = await call(client, "check_constraints")
        assert "none blocking" in said and checked["blocking_failures"] == []
        write(repo / "config.json", '{"train": {"seed": 7}}\n')
        said, checked = await call(client, "check_constraints")
        assert "BLOCKING FAILURES: seed42" in said and checked["blocking_failures"] == ["seed42"]
        write(repo / "config.json", '{"train": {"seed": 42}}\n')

        said, out = await call(client, "resume", brief_only=True)
        assert "Experiments must use seed 42" in said and "**Next step:** s2" in said
        assert out["outcome"] == "brief"
        prompt = await client.get_prompt("recovery_brief", {"task": "t"})
        brief = prompt.messages[0].content
        assert isinstance(brief, TextContent)
        assert "Do not modify the public API under src/api" in brief.text
        assert "**Next step:** s2" in brief.text

        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == ["ckpt://tasks"]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [
            "ckpt://tasks/{task}/state"
        ]
        read = await client.read_resource("ckpt://tasks/t/state")
        body = read.contents[0]
        assert isinstance(body, TextResourceContents)
        assert [s["id"] for s in json.loads(body.text)["steps"]] == ["s1", "s2", "s3"]
        read = await client.read_resource("ckpt://tasks")
        assert isinstance(read.contents[0], TextResourceContents)
        assert json.loads(read.contents[0].text)[0]["task"] == "t"

        said, out = await call(client, "resume", task="t")
        assert out["outcome"] == "ready" and "call confirm" in said
        assert "Experiments must use seed 42" in said
        said, verdict = await call(client, "confirm", restatement="Next step: s3")
        assert said.startswith("NOT confirmed: task t stays recovering") and "seed42" in said
        assert verdict["passed"] is False
        said, verdict = await call(client, "confirm", restatement=RESTATEMENT)
        assert said == "confirmed: task t is active again; next step s2"

        # errors: a tool error with the one line, and the server keeps answering
        assert await fails(client, "step_done", step_id="nope") == "task t has no step 'nope'"
        line = await fails(client, "event_append", type="step.end")
        assert "written by git ckpt itself" in line
        assert "no task 'zz'" in await fails(client, "task_status", task="zz")
        with pytest.raises(MCPError, match="no task 'zz'"):
            await client.read_resource("ckpt://tasks/zz/state")
        with pytest.raises(MCPError, match="no task 'zz'"):
            await client.get_prompt("recovery_brief", {"task": "zz"})
        said, _ = await call(client, "task_status")
        assert "task t is active" in said

    talk(repo, mode, script)
    events = log(repo)
    calls = [e for e in events if e["type"] == "tool.call"]
    assert len(calls) == 1 and calls[0]["input"] == {"cmd": "fetch papers"}
    assert calls[0]["output"] == "2 papers" and calls[0]["actor"]["agent"] == "mcp"
    assert SECRET not in json.dumps(events) and "[REDACTED" in json.dumps(calls[0]["data"])
    types = [e["type"] for e in events]
    assert "recovery.rejected" in types and "recovery.confirmed" in types
    state = ckpt_json(repo, "task", "show", "t")
    assert state["status"] == "active" and state["steps"][0]["outputs"] == {"papers": 2}
    triggers = [c["trigger"] for c in ckpt_json(repo, "list", "t")]
    assert {"pre_expensive_step", "step_end", "manual"} <= set(triggers)


def test_the_handshake_era_answers_raw_json_rpc_on_the_pipe(repo: Path) -> None:
    """An older client that speaks only `initialize` (no SDK): plain JSON lines."""
    research_task(repo)
    proc = subprocess.Popen(
        [GIT_CKPT, "mcp"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None

    def ask(msg_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        request = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        reply: dict[str, Any] = json.loads(proc.stdout.readline())
        assert reply["id"] == msg_id, reply
        return reply

    try:
        init = ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "raw", "version": "0"}})  # fmt: skip
        assert init["result"]["protocolVersion"] == "2025-06-18"
        assert "step_start" in init["result"]["instructions"]
        proc.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proc.stdin.write("this is not JSON\n")  # answered as JSON-RPC says, never fatal
        proc.stdin.flush()
        parse_error = json.loads(proc.stdout.readline())
        assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
        reply = ask(2, "tools/call", {"name": "step_start", "arguments": {"step_id": "s9"}})
        assert reply["result"]["isError"] is True
        assert reply["result"]["content"][0]["text"] == "task t has no step 's9'"
        reply = ask(3, "tools/call", {"name": "task_status", "arguments": {}})
        assert "next step: s1" in reply["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr.read() if proc.stderr else True


def test_mcp_outside_a_repository_is_one_line_and_an_exit_status(tmp_path: Path) -> None:
    proc = subprocess.run(
        [GIT_CKPT, "mcp"], cwd=tmp_path, capture_output=True, text=True, timeout=60, input=""
    )
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("git ckpt: error: ") and proc.stderr.count("\n") == 1


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from serving(monkeypatch, tmp_path)


def test_the_warm_daemon_never_serves_mcp(repo: Path, served: None) -> None:
    """`mcp` runs in the caller's own process: the client does not ask the daemon, and the
    daemon refuses it when asked."""
    assert daemon_find.refusal(["mcp"]) == "`mcp` runs in its own process"
    assert daemon_find.refusal(["-C", ".", "mcp"]) is not None
    ok(repo, "daemon", "start")
    ok(repo, "init")
    ok(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    before = status(repo)["served"]

    async def script(client: Client) -> None:
        said, _ = await call(client, "task_status")
        assert "next step: s1" in said

    talk(repo, "legacy", script)
    assert status(repo)["served"] == before  # `daemon status` itself runs here too
    sock = launch.connect(str(repo / ".git"), 10.0)
    try:
        env = [f"{k}={v}" for k, v in os.environ.items()]
        fp = daemon_find.fingerprint()
        fields = ["run", daemon_find.PROTOCOL, fp, str(repo), "18", "2", GIT_CKPT]
        launch.send_request(sock, [*fields, "mcp", *env])
        reply = launch.Replies(sock).next(30.0)
    finally:
        sock.close()
    assert reply is not None and reply[0] == "R"
    assert reply[1].decode().startswith("not served: `mcp` is a long-running server")


def test_no_other_command_imports_the_sdk() -> None:
    """Start-up stays cheap: every command module is loaded, the SDK is not."""
    code = (
        "import sys\n"
        "from git_agentckpt.cli.main import load_all_commands\n"
        "load_all_commands()\n"
        "import git_agentckpt.api\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
