"""`git ckpt import claude-code|codex FILE`: a past session's transcript as events.

Fixtures (tests/fixtures/agents/): `claude_handwritten.jsonl` and
`codex_handwritten.jsonl` are hand-written in the documented shapes (../shared
agents.md, codex-rs `RolloutLine`); `@SECRET@` in them is replaced by a token made at
run time where a test needs a secret.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, real_ckpt

import git_agentckpt
from git_agentckpt.model import Event, is_stop_signal, is_tool_only

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
CLAUDE = FIXTURES / "claude_handwritten.jsonl"
CODEX = FIXTURES / "codex_handwritten.jsonl"
CLAUDE_SESSION = "6f1c2b9e-3a4d-4c5e-9f10-0a1b2c3d4e5f"
# recorded by h13d from the real binaries against scripted model servers (kept as they are)
RECORDED_CLAUDE = FIXTURES / "claude_recorded.jsonl"
RECORDED_CODEX = FIXTURES / "codex_recorded.jsonl"
CODEX_SESSION = "019abcde-0123-7456-89ab-cdef01234567"


def token() -> str:
    """A GitHub-token-shaped secret, made here so no fixture holds one."""
    return "ghp_" + "".join("aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"[i] for i in range(36))


@pytest.fixture
def task(repo: Path) -> Path:
    ckpt(repo, "task", "start", "t", "--goal", "audit a session")
    return repo


def imported(repo: Path, task: str = "t") -> list[Event]:
    return [e for e in git_agentckpt.open(str(repo)).events(task) if not is_tool_only(e.type)]


def import_json(repo: Path, agent: str, path: Path, *args: str) -> dict[str, Any]:
    out = ckpt(repo, "import", agent, str(path), "-t", "t", "--json", *args)
    return dict(json.loads(out.stdout))


def copy(src: Path, dest: Path, secret: str = "@SECRET@", lines: int | None = None) -> Path:
    text = src.read_text().replace("@SECRET@", secret)
    if lines is not None:
        text = "".join(text.splitlines(keepends=True)[:lines])
    dest.write_text(text)
    return dest


# -- Claude Code ---------------------------------------------------------------------


def test_claude_transcript_becomes_these_events(task: Path) -> None:
    summary = import_json(task, "claude-code", CLAUDE)
    assert summary["imported"] == {
        "prompt": 4,
        "tool_call": 4,
        "tool_result": 0,
        "model_call": 6,
        "compaction": 1,
        "quota": 0,
        "error": 0,
    }
    assert summary["records"] == 20 and summary["sessions"] == [CLAUDE_SESSION]
    assert summary["already_imported"] == 0 and summary["malformed_lines"] == 0
    evs = imported(task)
    assert [e.type for e in evs] == [
        "user.prompt", "model.call", "tool.call", "model.call",
        "user.prompt", "model.call", "tool.call", "tool.call", "model.call",
        "user.prompt", "context.compacted",
        "user.prompt", "model.call", "tool.call", "model.call",
    ]  # fmt: skip
    assert all(e.actor["agent"] == "claude-code" for e in evs)
    assert all(e.actor["session"] == CLAUDE_SESSION for e in evs)
    prompts = [e for e in evs if e.type == "user.prompt"]
    assert [p.input["prompt"] for p in prompts if "command" not in p.data] == [
        "write notes/a.txt saying hello",
        "run the tests and show the config",
        "now write notes/b.txt",
    ]
    assert prompts[2].data["command"] == "/compact"
    # the record's own time and id are kept (the event's ts is the import's)
    assert prompts[0].data["at"] == "2026-11-30T10:00:00.000Z"
    assert prompts[0].data["record"] == "u01" and prompts[0].data["line"] == 1
    assert prompts[0].actor["import"] == ["prompt:u01"]


def test_claude_tool_calls_are_paired_with_their_results(task: Path) -> None:
    import_json(task, "claude-code", CLAUDE)
    calls = {e.actor["call"]: e for e in imported(task) if e.type == "tool.call"}
    assert list(calls) == ["toolu_01", "toolu_02", "toolu_03", "toolu_04"]
    write = calls["toolu_01"]
    assert write.input == {"file_path": "/tmp/proj/notes/a.txt", "content": "hello\n"}
    assert write.output == {
        "text": "File created successfully at: /tmp/proj/notes/a.txt",
        "bytes": 51,
    }
    assert write.data["tool"] == "Write" and write.data["status"] == "ok"
    assert write.data["at"] == "2026-11-30T10:00:02.000Z"
    assert write.data["result_at"] == "2026-11-30T10:00:03.000Z"
    assert write.data["record"] == "a02" and write.data["result_record"] == "u02"
    assert write.actor["import"] == ["call:toolu_01", "result:toolu_01"]
    failed = calls["toolu_02"]
    assert failed.input == {"command": "pytest -q", "description": "Run tests"}
    assert failed.data["status"] == "error"
    assert "1 failed, 1 passed" in failed.output["text"]
    # two tool_use blocks of one reply, their results on two later lines
    assert calls["toolu_03"].output["text"] == "MODE=fast\nGITHUB_TOKEN=@SECRET@\n"
    assert not any(is_stop_signal(e) for e in calls.values())  # a failed tool is no stop


def test_claude_usage_per_reply_and_compaction_tokens(task: Path) -> None:
    import_json(task, "claude-code", CLAUDE)
    evs = imported(task)
    models = [e for e in evs if e.type == "model.call"]
    # msg_01 is written as two lines (text block, tool_use block): one model call, the
    # usage of its last line
    assert [m.data["message_id"] for m in models] == [
        "msg_01", "msg_02", "msg_03", "msg_04", "msg_05", "msg_06",
    ]  # fmt: skip
    assert models[0].data["usage"] == {
        "input_tokens": 10,
        "output_tokens": 40,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 500,
        "context_tokens": 1510,
    }
    assert models[0].data["model"] == "claude-sonnet-4-5"
    assert [m.data["usage"]["context_tokens"] for m in models] == [
        1510, 1570, 1603, 1712, 908, 942,
    ]  # fmt: skip
    (compaction,) = [e for e in evs if e.type == "context.compacted"]
    assert compaction.data["trigger"] == "manual"
    assert compaction.data["tokens_before"] == 1718  # compactMetadata.preTokens
    assert compaction.data["tokens_after"] == 908  # the next reply's context
    assert compaction.data["record"] == "s01"
    assert compaction.data["at"] == "2026-11-30T10:02:05.000Z"


def test_compaction_at_the_end_has_no_tokens_after(task: Path, tmp_path: Path) -> None:
    cut = copy(CLAUDE, tmp_path / "cut.jsonl", lines=16)  # ends after the boundary
    import_json(task, "claude-code", cut)
    (compaction,) = [e for e in imported(task) if e.type == "context.compacted"]
    assert compaction.data["tokens_before"] == 1718
    assert compaction.data["tokens_after"] is None


# -- Codex ---------------------------------------------------------------------------


def test_codex_rollout_becomes_these_events(task: Path) -> None:
    summary = import_json(task, "codex", CODEX)
    assert summary["imported"] == {
        "prompt": 2,
        "tool_call": 3,
        "tool_result": 0,
        "model_call": 4,
        "compaction": 1,
        "quota": 5,
        "error": 0,
    }
    assert summary["sessions"] == [CODEX_SESSION] and summary["records"] == 22
    evs = imported(task)
    assert [e.type for e in evs] == [
        "user.prompt", "model.rate_limits", "tool.call", "model.call", "tool.call",
        "model.call", "model.call", "model.rate_limits", "quota.warning",
        "context.compacted", "user.prompt", "tool.call", "model.call",
        "model.rate_limits", "quota.exceeded",
    ]  # fmt: skip
    prompts = [e.input["prompt"] for e in evs if e.type == "user.prompt"]
    # from the user_message events; the <environment_context> message is Codex's own
    assert prompts == ["write notes/a.txt saying hello", "show the config"]
    calls = {e.actor["call"]: e for e in evs if e.type == "tool.call"}
    shell = calls["call_1"]
    assert shell.input == {
        "command": ["bash", "-lc", "echo hello > notes/a.txt"],
        "workdir": "/tmp/proj",
    }  # the arguments string, parsed
    assert json.loads(shell.output["text"])["metadata"]["exit_code"] == 0
    assert shell.data["tool"] == "shell" and shell.data["status"] == "ok"
    patch = calls["call_2"]
    assert patch.data["tool"] == "apply_patch"
    assert patch.input == "*** Begin Patch\n*** Add File: notes/b.txt\n+b\n*** End Patch"
    assert patch.output["text"].startswith("Success. Updated the following files:")
    assert all(e.actor["session"] == CODEX_SESSION for e in evs)
    models = [e for e in evs if e.type == "model.call"]
    # the first token_count has no info; the repeat with unchanged totals is no reply
    assert [m.data["usage"]["context_tokens"] for m in models] == [1050, 1120, 1130, 320]
    assert models[1].data["usage"] == {
        "input_tokens": 1080,
        "cached_input_tokens": 1000,
        "output_tokens": 40,
        "reasoning_output_tokens": 10,
        "total_tokens": 1120,
        "context_tokens": 1120,
    }
    assert models[0].data["model"] == "gpt-5.5" and models[0].data["context_window"] == 272000


def test_codex_compaction_and_quota_signals(task: Path) -> None:
    import_json(task, "codex", CODEX)
    evs = imported(task)
    (compaction,) = [e for e in evs if e.type == "context.compacted"]
    # `compacted` and `context_compacted` are one compaction: both records are its keys
    assert len(compaction.actor["import"]) == 2
    assert compaction.data["tokens_before"] == 1130 and compaction.data["tokens_after"] == 320
    limits = [e.data for e in evs if e.type == "model.rate_limits"]
    assert [x["primary"]["used_percent"] for x in limits] == [42.0, 91.5, 95.0]
    assert limits[0]["primary"] == {
        "used_percent": 42.0,
        "window_minutes": 300,
        "resets_at": 1796050800,
        "resets_at_utc": "2026-11-30T15:00:00Z",
    }
    assert limits[0]["secondary"]["used_percent"] == 10.0
    # one warning per window and reset time: 91.5% warns, 95% in the same window does not
    (warning,) = [e for e in evs if e.type == "quota.warning"]
    assert warning.data["window"] == "primary" and warning.data["used_percent"] == 91.5
    assert warning.data["resets_at"] == 1796050800
    assert warning.data["message"] == (
        "primary rate-limit window 91.5% used, resets 2026-11-30T15:00:00Z"
    )
    assert is_stop_signal(warning)
    assert not any(is_stop_signal(e) for e in evs if e.type == "model.rate_limits")
    (exceeded,) = [e for e in evs if e.type == "quota.exceeded"]
    assert exceeded.data["kind"] == "usage_limit_exceeded"
    assert exceeded.data["error"] == "You've hit your usage limit. Try again later."


def test_codex_quota_is_why_the_last_session_stopped(task: Path) -> None:
    import_json(task, "codex", CODEX)
    out = ckpt(task, "resume", "t", "--brief-only", ok=False).stdout
    assert "quota.exceeded" in out and "You've hit your usage limit" in out


# -- transcripts recorded from the real agents ----------------------------------------


def test_recorded_claude_code_session(task: Path) -> None:
    """Claude Code 2.1.328: `claude -p "write a"` (a Write tool call), then
    `claude -p /compact --continue`, then `claude -p next --continue`: one file."""
    summary = import_json(task, "claude-code", RECORDED_CLAUDE)
    assert summary["sessions"] == ["c6dff507-c73e-4181-b5b3-f4d3eff044c4"]
    assert summary["malformed_lines"] == 0
    evs = imported(task)
    assert [e.type for e in evs] == [
        "user.prompt", "model.call", "tool.call", "model.call",
        "context.compacted", "user.prompt", "user.prompt", "model.call",
    ]  # fmt: skip
    prompts = [e for e in evs if e.type == "user.prompt"]
    assert [p.input["prompt"] for p in prompts if "command" not in p.data] == ["write a", "next"]
    assert prompts[1].data["command"] == "/compact"
    (call,) = [e for e in evs if e.type == "tool.call"]
    assert call.actor["call"] == "toolu_0001" and call.data["tool"] == "Write"
    assert call.input == {"file_path": "/tmp/h13d_p1/run/proj/a.txt", "content": "hello\n"}
    assert call.output["text"].startswith(
        "File created successfully at: /tmp/h13d_p1/run/proj/a.txt"
    )
    assert call.data["status"] == "ok" and call.data["result_line"] == 24
    (compaction,) = [e for e in evs if e.type == "context.compacted"]
    assert compaction.data["trigger"] == "manual"
    assert compaction.data["tokens_before"] == 1041  # compactMetadata.preTokens
    assert compaction.data["tokens_after"] == 2694  # compactMetadata.postTokens
    assert compaction.data["next_reply_tokens"] == 1000  # the next reply's usage
    models = [e for e in evs if e.type == "model.call"]
    assert [m.data["message_id"] for m in models] == ["msg_0001", "msg_0002", "msg_0005"]
    assert all(m.data["usage"]["context_tokens"] == 1000 for m in models)
    assert models[0].data["model"] == "claude-opus-5-5"


def test_recorded_codex_rollout(task: Path) -> None:
    """Codex 0.169.0: `codex exec "write files"` (exec_command, apply_patch), then
    `codex exec resume --last continue` with an automatic compaction before its turn."""
    summary = import_json(task, "codex", RECORDED_CODEX)
    assert summary["sessions"] == ["01a22d36-b7e8-7272-9ed5-1f098476368f"]
    evs = imported(task)
    assert [e.type for e in evs] == [
        "user.prompt", "tool.call", "model.call", "tool.call", "model.call", "model.call",
        "model.call", "context.compacted", "user.prompt", "model.call",
    ]  # fmt: skip
    # what the user typed, not Codex's own <environment_context> or the hooks' context
    assert [e.input["prompt"] for e in evs if e.type == "user.prompt"] == [
        "write files",
        "continue",
    ]
    calls = {e.actor["call"]: e for e in evs if e.type == "tool.call"}
    assert calls["call_0001"].data["tool"] == "exec_command"
    assert calls["call_0001"].input == {"cmd": "printf 'one\\n' > one.txt"}
    assert "Process exited with code 0" in calls["call_0001"].output["text"]
    assert calls["call_0002"].data["tool"] == "apply_patch"
    assert calls["call_0002"].input.startswith("*** Begin Patch\n*** Add File: two.txt")
    assert "A two.txt" in calls["call_0002"].output["text"]
    models = [e for e in evs if e.type == "model.call"]
    assert [m.data["response_id"] for m in models] == [f"resp_000{i}" for i in range(1, 6)]
    assert [m.data["usage"]["context_tokens"] for m in models] == [1020, 1020, 6020, 1020, 1020]
    assert models[0].data["context_window"] == 258400
    (compaction,) = [e for e in evs if e.type == "context.compacted"]
    # the `compacted` line and the ContextCompaction item: one compaction
    assert len(compaction.actor["import"]) == 2
    assert compaction.data["tokens_before"] == 1020  # the summary request's context
    assert compaction.data["tokens_after"] == 7023  # Codex's count of the new history
    assert compaction.data["next_reply_tokens"] == 1020


# -- idempotency ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "path"),
    [
        ("claude-code", CLAUDE),
        ("codex", CODEX),
        ("claude-code", RECORDED_CLAUDE),
        ("codex", RECORDED_CODEX),
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
        ("codex", RECORDED_CODEX, 33),  # after `compacted`, before Codex's count
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


def test_a_secret_where_a_long_output_is_cut_is_redacted_whole(
    task: Path, tmp_path: Path
) -> None:
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
def test_the_other_agents_file_is_refused(
    task: Path, agent: str, path: Path, message: str
) -> None:
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
