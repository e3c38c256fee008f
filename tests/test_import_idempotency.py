"""`git ckpt import`: idempotent by record id, redacted, read-only, and strict about
its input (malformed lines, another agent's file, the task), with its summary output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import Gate, ckpt, real_ckpt
from transcript_fixtures import (
    CLAUDE,
    CLAUDE_SESSION,
    CODEX,
    RECORDED_CLAUDE,
    RECORDED_CLAUDE_E2E,
    RECORDED_CODEX,
    RECORDED_CODEX_E2E,
    copy,
    import_json,
    imported,
    token,
)

import git_agentckpt
from git_agentckpt.model import is_tool_only


@pytest.fixture
def task(repo: Path) -> Path:
    ckpt(repo, "task", "start", "t", "--goal", "audit a session")
    return repo


# -- idempotency ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "path"),
    [
        ("claude-code", CLAUDE),
        ("codex", CODEX),
        ("claude-code", RECORDED_CLAUDE),
        ("claude-code", RECORDED_CLAUDE_E2E),
        ("codex", RECORDED_CODEX),
        ("codex", RECORDED_CODEX_E2E),
    ],
)
def test_importing_twice_is_importing_once(task: Path, agent: str, path: Path) -> None:
    first = import_json(task, agent, path)
    once = imported(task)
    second = import_json(task, agent, path)
    assert second["events"] == 0
    assert second["already_imported"] == first["events"] == len(once)
    assert [e.id for e in imported(task)] == [e.id for e in once]


@pytest.mark.parametrize(
    ("agent", "path", "cut"),
    [
        ("claude-code", CLAUDE, 3),  # after toolu_01's tool_use, before its result
        ("claude-code", CLAUDE, 8),  # after two tool_uses of one reply
        ("claude-code", CLAUDE, 14),  # after the compaction boundary
        ("codex", CODEX, 7),  # after call_1, before its output
        ("codex", CODEX, 17),  # between `compacted` and `context_compacted`
        ("claude-code", RECORDED_CLAUDE, 41),  # after the boundary, before the next reply
        ("claude-code", RECORDED_CLAUDE_E2E, 122),  # killed in toolu_0011: no result yet
        ("codex", RECORDED_CODEX, 33),  # after `compacted`, before Codex's count
        ("codex", RECORDED_CODEX_E2E, 52),  # in `step start notes s2`, before its output
    ],
)
def test_a_grown_transcript_adds_only_the_new_records(
    task: Path, tmp_path: Path, agent: str, path: Path, cut: int
) -> None:
    growing = copy(path, tmp_path / "session.jsonl", lines=cut)
    early = import_json(task, agent, growing)
    copy(path, growing)  # the session went on: the same file, longer
    late = import_json(task, agent, growing)
    # what the first import took is not taken again (a call's late result aside)
    assert late["already_imported"] + late["imported"]["tool_result"] == early["events"]
    evs = imported(task)
    keys = [k for e in evs for k in e.actor["import"]]
    assert len(keys) == len(set(keys))  # no record imported twice
    # the same records as one import of the whole file
    ck = git_agentckpt.open(str(task))
    ck.task_start("whole", "g")
    ckpt(task, "import", agent, str(path), "-t", "whole")
    whole = [e for e in ck.events("whole") if not is_tool_only(e.type)]
    assert set(keys) <= {k for e in whole for k in e.actor["import"]}
    assert all(set(e.actor["import"]) & set(keys) for e in whole)
    kinds = [e.type for e in evs if e.type != "tool.result"]
    assert sorted(kinds) == sorted(e.type for e in whole)
    # a call imported before its result gets the result as a tool.result
    results = [e for e in evs if e.type == "tool.result"]
    pending = [e for e in evs if e.type == "tool.call" and e.data["status"] == "no_result"]
    assert sorted(e.actor["call"] for e in results) == sorted(e.actor["call"] for e in pending)
    assert all(r.output and r.output["text"] and r.data["status"] for r in results)
    if cut == 3:
        (result,) = results
        assert result.actor["call"] == "toolu_01" and result.data["record"] == "u02"
        assert result.output["text"] == "File created successfully at: /tmp/proj/notes/a.txt"


def test_a_record_the_file_holds_twice_is_imported_once(task: Path, tmp_path: Path) -> None:
    lines = CLAUDE.read_text().splitlines(keepends=True)
    path = tmp_path / "twice.jsonl"
    path.write_text("".join(lines[:4] + lines[:4] + lines[4:]))  # a prompt and a call again
    summary = import_json(task, "claude-code", path)
    # the prompt and the tool call once more (the reply, msg_01, is one model call anyway)
    assert summary["events"] == 15 and summary["already_imported"] == 2
    keys = [k for e in imported(task) for k in e.actor["import"]]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    "logged",
    [
        {"actor": {"session": CLAUDE_SESSION, "call": "toolu_01"}, "tool": "Write"},
        # what `git ckpt hook claude-code PostToolUse` writes (h13a)
        {"actor": {"agent": "claude-code", "session": CLAUDE_SESSION}, "tool": "Write",
         "status": "ok", "tool_use_id": "toolu_01"},
    ],
)  # fmt: skip
def test_a_tool_call_logged_by_a_hook_is_not_imported_again(
    task: Path, logged: dict[str, Any]
) -> None:
    ckpt(task, "event", "t", "--type", "tool.call", "--json", json.dumps(logged))
    summary = import_json(task, "claude-code", CLAUDE)
    assert summary["imported"]["tool_call"] == 3
    calls = [e.actor.get("call") for e in imported(task) if e.type == "tool.call"]
    assert "toolu_01" not in calls[1:] and len(calls) == 4


def test_a_prompt_logged_by_a_hook_is_not_imported_again(task: Path) -> None:
    logged = {"actor": {"agent": "claude-code", "session": "c6dff507"}, "prompt_id": "0e569cab"}
    lines = RECORDED_CLAUDE.read_text().replace("0e569cab-bbdc-4865-903b-45f9987a4ac2", "0e569cab")
    ckpt(task, "event", "t", "--type", "user.prompt", "--json", json.dumps(logged))
    path = task.parent / "c.jsonl"
    path.write_text(lines)
    summary = import_json(task, "claude-code", path)
    assert summary["imported"]["prompt"] == 2 and summary["already_imported"] == 1
    prompts = [e.input["prompt"] for e in imported(task) if e.type == "user.prompt" and e.input]
    assert "next" not in prompts


RACER = """
import os, sys
import git_agentckpt
print("ready", flush=True)
os.read(int(sys.argv[3]), 1)
ck = git_agentckpt.open(sys.argv[1])
print(ck.import_transcript("claude-code", sys.argv[2], "t").events)
"""


def test_two_imports_at_once_import_once(task: Path) -> None:
    gate = Gate()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(task), str(RECORDED_CLAUDE_E2E), str(gate.fd)],
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=gate.fds,
        )
        for _ in range(3)
    ]
    gate.open(procs)
    written = sorted(int(p.communicate(timeout=120)[0].split()[-1]) for p in procs)
    assert written == [0, 0, 25]  # one import wrote everything, the others nothing
    keys = [k for e in imported(task) for k in e.actor["import"]]
    assert len(keys) == len(set(keys))


# -- secrets, caps, read-only --------------------------------------------------------


def test_a_secret_in_a_tool_result_never_reaches_the_store(task: Path, tmp_path: Path) -> None:
    secret = token()
    path = copy(CLAUDE, tmp_path / "s.jsonl", secret=secret)
    import_json(task, "claude-code", path)
    (call,) = [e for e in imported(task) if e.actor.get("call") == "toolu_03"]
    assert call.output["text"] == "MODE=fast\nGITHUB_TOKEN=[REDACTED:assign:GITHUB_TOKEN]\n"
    assert secret not in git(task, "log", "--format=%B", "refs/agent/events/t")
    every_object = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=task, capture_output=True
    ).stdout
    assert b"[REDACTED:" in every_object and secret[:20].encode() not in every_object


def test_a_secret_where_a_long_output_is_cut_is_redacted_whole(task: Path, tmp_path: Path) -> None:
    """A long output keeps its head and tail: a secret across the cut is redacted first."""
    secret = token()
    text = "x" * 3049 + " " + secret + " " + "y" * 200_000  # the cut: at 3072
    line = {
        "type": "user",
        "uuid": "u99",
        "sessionId": "s",
        "timestamp": "2026-11-30T12:00:00Z",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": text}
        ]},
    }  # fmt: skip
    use = {
        "type": "assistant",
        "uuid": "a99",
        "sessionId": "s",
        "timestamp": "2026-11-30T11:59:59Z",
        "message": {"id": "m", "role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "cat"}}
        ]},
    }  # fmt: skip
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(use) + "\n" + json.dumps(line) + "\n")
    import_json(task, "claude-code", path)
    (call,) = [e for e in imported(task) if e.type == "tool.call"]
    assert call.output["bytes"] == len(text)
    assert len(call.output["text"]) < 4200  # head and tail, not 200 KB
    assert "[REDACTED:" in call.output["text"]  # the marker may be cut, never the secret
    assert "characters left out" in call.output["text"]
    body = git(task, "log", "--format=%B", "refs/agent/events/t")
    assert secret[:12] not in body
    assert len(body) < 64 * 1024  # inline, not a payload stored apart


def test_the_transcript_is_only_read(task: Path, tmp_path: Path) -> None:
    path = shutil.copy(CLAUDE, tmp_path / "ro.jsonl")
    os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    os.chmod(path, 0o444)
    before = Path(path).read_bytes()
    import_json(task, "claude-code", Path(path))
    import_json(task, "claude-code", Path(path))
    st = os.stat(path)
    assert Path(path).read_bytes() == before
    assert st.st_mtime_ns == 1_700_000_000_000_000_000
    assert st.st_mode & 0o777 == 0o444
    assert sorted(os.listdir(tmp_path)) == sorted(["ro.jsonl", "repo"])


# -- bad input -----------------------------------------------------------------------


def test_malformed_lines_are_skipped_with_a_warning(task: Path, tmp_path: Path) -> None:
    lines = CLAUDE.read_text().splitlines(keepends=True)
    lines[2:2] = ['{"type": "user", "uuid": \n', "[1, 2]\n"]  # lines 3 and 4
    path = tmp_path / "bad.jsonl"
    path.write_bytes("".join(lines).encode() + b"\xff\xfe\n")
    result = ckpt(task, "import", "claude-code", str(path), "-t", "t")
    assert result.exit_code == 0
    warnings = [x for x in result.stderr.splitlines() if x.startswith("git ckpt: warning:")]
    assert warnings == [
        f"git ckpt: warning: {path}:3: skipped a line that is not valid JSON",
        f"git ckpt: warning: {path}:4: skipped a line that is not a JSON object",
        f"git ckpt: warning: {path}:23: skipped a line that is not UTF-8",
    ]
    assert "3 malformed lines skipped" in result.stdout
    assert len(imported(task)) == 15  # everything else, as from the clean file


@pytest.mark.parametrize(
    ("agent", "path", "message"),
    [
        ("codex", CLAUDE, "is a Claude Code transcript, not a Codex rollout"),
        ("claude-code", CODEX, "is a Codex rollout, not a Claude Code transcript"),
    ],
)
def test_the_other_agents_file_is_refused(task: Path, agent: str, path: Path, message: str) -> None:
    before = git(task, "rev-parse", "refs/agent/events/t")
    result = ckpt(task, "import", agent, str(path), "-t", "t", ok=False)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("git ckpt: error: ") and message in line
    other = "claude-code" if agent == "codex" else "codex"
    assert f"run `git ckpt import {other} {path}`" in line
    assert git(task, "rev-parse", "refs/agent/events/t") == before


def test_a_file_that_is_no_transcript_is_refused(task: Path, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"a": 1}\nnot json\n')
    result = ckpt(task, "import", "claude-code", str(path), "-t", "t", ok=False)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "is not a Claude Code transcript: none of its 2 lines is a record of it" in line
    missing = ckpt(task, "import", "codex", str(tmp_path / "nope.jsonl"), "-t", "t", ok=False)
    assert missing.exit_code == 2 and "cannot read transcript" in missing.stderr
    empty = tmp_path / "new-session.jsonl"  # a session that wrote nothing yet
    empty.write_text("")
    assert import_json(task, "codex", empty)["events"] == 0


def test_the_task_is_chosen_as_elsewhere(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = ckpt(repo, "import", "codex", str(CODEX), ok=False)
    assert none.exit_code == 2 and "no active task" in none.stderr
    ckpt(repo, "task", "start", "alpha", "--goal", "g")
    unknown = ckpt(repo, "import", "codex", str(CODEX), "-t", "alpah", ok=False)
    assert unknown.exit_code == 3 and "did you mean 'alpha'?" in unknown.stderr
    assert "imported into task alpha" in ckpt(repo, "import", "codex", str(CODEX)).stdout
    ckpt(repo, "task", "start", "beta", "--goal", "g")
    monkeypatch.setenv("GIT_CKPT_TASK", "beta")
    assert "imported into task beta" in ckpt(repo, "import", "codex", str(CODEX)).stdout


# -- output --------------------------------------------------------------------------


def test_dry_run_counts_and_writes_nothing(task: Path) -> None:
    before = git(task, "rev-parse", "refs/agent/events/t")
    summary = import_json(task, "codex", CODEX, "--dry-run")
    assert summary["dry_run"] is True and summary["events"] == 15
    assert git(task, "rev-parse", "refs/agent/events/t") == before
    text = ckpt(task, "import", "codex", str(CODEX), "-t", "t", "--dry-run").stdout
    assert text.startswith("would import into task t")


def test_text_summary_through_the_installed_command(task: Path) -> None:
    proc = real_ckpt(task, "import", "claude-code", str(CLAUDE), "-t", "t")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"imported into task t from {CLAUDE} (claude-code, {CLAUDE_SESSION}):",
        "  4 prompts, 4 tool calls, 6 model calls, 1 compaction",
        "  0 events already imported, 0 malformed lines skipped",
    ]
    again = real_ckpt(task, "import", "claude-code", str(CLAUDE), "-t", "t")
    assert again.stdout.splitlines()[1:] == [
        "  0 prompts, 0 tool calls, 0 model calls, 0 compactions",
        "  15 events already imported, 0 malformed lines skipped",
    ]
