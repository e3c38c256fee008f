"""`git ckpt import claude-code|codex FILE`: the events a transcript becomes.

On the hand-written fixtures of the documented shapes and on the transcripts recorded
from the real agents (tests/transcript_fixtures.py): counts, types, tool input and
result pairs, usage per reply, compaction tokens before and after, quota signals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import ckpt
from transcript_fixtures import (
    CLAUDE,
    CLAUDE_SESSION,
    CODEX,
    CODEX_SESSION,
    RECORDED_CLAUDE,
    RECORDED_CLAUDE_E2E,
    RECORDED_CODEX,
    RECORDED_CODEX_E2E,
    copy,
    import_json,
    imported,
)

from git_agentckpt.model import is_stop_signal


@pytest.fixture
def task(repo: Path) -> Path:
    ckpt(repo, "task", "start", "t", "--goal", "audit a session")
    return repo


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
    assert failed.data["status"] == "failed"
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


def test_claude_api_error_replies_say_why_the_session_stopped(task: Path, tmp_path: Path) -> None:
    def error_line(n: int, text: str, **extra: Any) -> str:
        return json.dumps({
            "type": "assistant", "uuid": f"e{n}", "sessionId": "s", "isApiErrorMessage": True,
            "timestamp": f"2026-11-30T12:00:0{n}Z", **extra,
            "message": {"id": f"m{n}", "role": "assistant", "model": "<synthetic>",
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                        "content": [{"type": "text", "text": text}]},
        }) + "\n"  # fmt: skip

    path = tmp_path / "errors.jsonl"
    path.write_text(
        error_line(1, "API Error: 500 Internal server error")
        + error_line(2, "Claude AI usage limit reached|1796050800")
        + error_line(3, "API Error: 429", error="rate_limit")
    )
    import_json(task, "claude-code", path)
    evs = imported(task)
    assert [(e.type, e.data["error"]) for e in evs] == [
        ("model.error", "API Error: 500 Internal server error"),
        ("quota.exceeded", "Claude AI usage limit reached|1796050800"),
        ("quota.exceeded", "API Error: 429"),
    ]
    assert evs[2].data["kind"] == "rate_limit" and all(is_stop_signal(e) for e in evs)


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


def test_codex_errors_say_why_the_session_stopped(task: Path, tmp_path: Path) -> None:
    def line(payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "2026-11-30T12:00:00Z", "type": "event_msg",
                           "payload": payload}) + "\n"  # fmt: skip

    path = tmp_path / "rollout.jsonl"
    path.write_text(
        line({"type": "error", "message": "stream disconnected before completion"})
        + line({"type": "token_count", "info": None,
                "rate_limits": {"primary": None, "rate_limit_reached_type": "primary"}})
    )  # fmt: skip
    import_json(task, "codex", path)
    evs = imported(task)
    assert [(e.type, e.data["error"]) for e in evs] == [
        ("model.error", "stream disconnected before completion"),
        ("quota.exceeded", "rate limit reached: primary"),
    ]
    assert all(is_stop_signal(e) for e in evs)


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


def test_recorded_claude_code_session_with_hooks_and_a_kill(task: Path) -> None:
    """Claude Code 2.1.328 under `git ckpt hook claude-code` (h13d's end-to-end test): two
    steps, /compact, a turn killed while the model's reply was held, a restart."""
    summary = import_json(task, "claude-code", RECORDED_CLAUDE_E2E)
    assert summary["sessions"] == ["25951a21-d25f-45e6-bc2e-ef2b74aa6872"]
    assert summary["imported"]["prompt"] == 5 and summary["imported"]["model_call"] == 11
    evs = imported(task)
    prompts = [e.input["prompt"] for e in evs if e.type == "user.prompt"]
    assert [p for p in prompts if not p.startswith("<command-name>")] == [
        "Work on task notes: do step s1.",
        "Now do step s2.",
        "Continue the task.",
        "Continue the task.",
    ]
    calls = [e for e in evs if e.type == "tool.call"]
    assert [(c.actor["call"], c.data["tool"], c.data["status"]) for c in calls] == [
        ("toolu_0001", "Bash", "ok"),
        ("toolu_0002", "Write", "ok"),
        ("toolu_0003", "Bash", "ok"),
        ("toolu_0005", "Bash", "failed"),  # step start refused: the task was recovering
        ("toolu_0006", "Write", "ok"),
        ("toolu_0007", "Bash", "ok"),
        ("toolu_0010", "Bash", "failed"),
        ("toolu_0011", "Write", "interrupted"),  # the kill; written on restart
    ]
    assert calls[0].input["command"] == "git ckpt step start notes s1"
    assert calls[3].output["text"].startswith("Exit code 13\ngit ckpt: error: task notes is")
    assert calls[7].output["text"].startswith("[Tool call interrupted")
    (compaction,) = [e for e in evs if e.type == "context.compacted"]
    assert (compaction.data["tokens_before"], compaction.data["tokens_after"]) == (1923, 4322)
    # the restart's "No response requested." is Claude Code's own (<synthetic>): no model call
    assert all(e.data["model"] == "claude-opus-5-5" for e in evs if e.type == "model.call")


def test_recorded_codex_session_with_hooks(task: Path) -> None:
    """Codex 0.169.0 under `git ckpt hook codex` (h13d's end-to-end test): step s1 by
    exec_command and apply_patch, an automatic compaction, then step s2, whose
    `git ckpt step start` failed (exit 13: the task was recovering)."""
    summary = import_json(task, "codex", RECORDED_CODEX_E2E)
    assert summary["sessions"] == ["01a22d3f-4182-7750-b796-a8e30e469b9b"]
    assert summary["imported"] == {
        "prompt": 2,
        "tool_call": 7,
        "tool_result": 0,
        "model_call": 10,
        "compaction": 1,
        "quota": 0,
        "error": 0,
    }
    evs = imported(task)
    assert [e.input["prompt"] for e in evs if e.type == "user.prompt"] == [
        "Work on task notes: do step s1.",
        "Continue the task.",
    ]
    calls = [e for e in evs if e.type == "tool.call"]
    assert [(c.actor["call"], c.data["tool"], c.data["status"]) for c in calls] == [
        ("call_0001", "exec_command", "ok"),
        ("call_0002", "apply_patch", "ok"),
        ("call_0003", "exec_command", "ok"),
        ("call_0004", "exec_command", "ok"),
        ("call_0007", "exec_command", "failed"),  # the exit status in the output's header
        ("call_0008", "apply_patch", "ok"),
        ("call_0009", "exec_command", "ok"),
    ]
    assert [c.data["exit_code"] for c in calls] == [0, 0, 0, 0, 13, 0, 0]
    assert calls[0].input == {"cmd": "git ckpt step start notes s1", "login": False}
    (compaction,) = [e for e in evs if e.type == "context.compacted"]
    assert compaction.data["tokens_before"] == 1020 and compaction.data["tokens_after"] == 6900
    assert compaction.data["line"] == 41
