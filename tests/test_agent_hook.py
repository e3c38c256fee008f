"""`git ckpt hook claude-code|codex EVENT`: every event with the payloads the agents send.

The payloads are the ones seen from the real binaries (shared/agents.md). Each
test checks what the hook printed (the JSON the agent reads) and what it left
in the repository: events, checkpoints and their triggers, the session record,
`.git/agent/hooks.log`. A few calls go through the installed `git ckpt` with a
real stdin, in their own process and served by a warm daemon.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from daemon_helpers import running_status, serving
from helpers import BIN_DIR, ckpt, ckpt_json, real_ckpt, write

from git_agentckpt.integrations.hook_resume import MAX_CONTEXT, fit
from git_agentckpt.integrations.summary import summarise
from git_agentckpt.integrations.transcript_usage import MAX_TAIL, last_usage

CONTRACT = """\
constraints:
  - id: seed-42
    text: Experiments use seed 42, never another seed
    severity: warn
    check: {kind: file_exists, file: README.md}
  - id: report-exists
    text: The report results/summary.md exists before a turn ends
    severity: block
    check: {kind: file_exists, file: results/summary.md}
"""
PROSE = "Never push to the remote without asking the person first.\n"
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SESSION = "3f2b9c1e-0000-4000-8000-000000000001"


def hook(
    repo: Path, event: str, payload: dict[str, Any] | str, agent: str = "claude-code"
) -> dict[str, Any]:
    """One hook call in-process: its stdout as JSON (the exit status must be 0)."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    result = ckpt(repo, "hook", agent, event, input=text)
    assert result.exit_code == 0
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def claude(event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "cwd": "/tmp/proj", "hook_event_name": event, **fields}


def events(repo: Path, task: str) -> list[dict[str, Any]]:
    out = ckpt(repo, "log", task, "--json").stdout
    return [json.loads(line) for line in out.splitlines()]


def of_type(repo: Path, task: str, type_: str) -> list[dict[str, Any]]:
    return [e for e in events(repo, task) if e["type"] == type_]


def checkpoints(repo: Path, task: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ckpt_json(repo, "list", task)
    return found  # newest first


def hooks_log(repo: Path) -> list[list[str]]:
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
    text = (git_dir / "agent" / "hooks.log").read_text()
    return [line.split("\t") for line in text.splitlines()]


@pytest.fixture
def task_repo(repo: Path) -> Path:
    """A task `exp` with two steps and the contract's constraints, all committed."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / ".agent" / "contracts" / "constraints.md", PROSE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "contract")
    ckpt(
        repo, "task", "start", "exp", "--goal", "Run the seed ablation",
        "--step", "s1:prepare the data", "--step", "s2:run the ablation",
        "--constraint", "seed-42", "--constraint", "report-exists",
    )  # fmt: skip
    return repo


def claude_transcript(path: Path, usages: list[dict[str, int]]) -> Path:
    lines = [json.dumps({"type": "user", "message": {"role": "user", "content": "go"}})]
    for usage in usages:
        message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "usage": usage}
        lines.append(json.dumps({"type": "assistant", "message": message}))
        lines.append(json.dumps({"type": "user", "message": {"content": "tool result"}}))
    path.write_text("\n".join(lines) + "\n")
    return path


def codex_rollout(path: Path, input_tokens: int, window: int) -> Path:
    info = {
        "last_token_usage": {"input_tokens": input_tokens, "cached_input_tokens": 100},
        "total_token_usage": {"input_tokens": input_tokens * 3},
        "model_context_window": window,
    }
    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": SESSION}},
        {"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count", "info": info}},
        {"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count", "info": None}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "message"}},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


# -- SessionStart: the task, the session, the brief -----------------------------------


def test_startup_starts_a_task_named_after_the_branch_and_records_the_session(
    repo: Path,
) -> None:
    git(repo, "checkout", "-q", "-b", "feature/x")
    out = hook(repo, "SessionStart", claude("SessionStart", source="startup"))
    assert out == {}
    state = ckpt_json(repo, "task", "show", "feature/x")
    assert state["status"] == "active" and "claude-code" in state["goal"]
    [start] = of_type(repo, "feature/x", "session.start")
    assert start["actor"] == {"agent": "claude-code", "session": SESSION}
    assert start["data"]["source"] == "startup" and start["data"]["task_from"] == "started"
    sessions = json.loads((repo / ".git" / "agent" / "sessions.json").read_text())["sessions"]
    assert sessions[SESSION]["task"] == "feature/x"
    assert sessions[SESSION]["agent"] == "claude-code"
    # a later call of the same session finds its task through the record
    ckpt(repo, "task", "start", "other", "--goal", "a second active task")
    hook(repo, "UserPromptSubmit", claude("UserPromptSubmit", prompt="continue"))
    assert of_type(repo, "feature/x", "user.prompt")[0]["input"] == "continue"


def test_the_task_comes_from_git_ckpt_task_then_the_single_active_task(
    task_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook(task_repo, "SessionStart", claude("SessionStart", source="startup"))
    assert of_type(task_repo, "exp", "session.start")[0]["data"]["task_from"] == "active"
    monkeypatch.setenv("GIT_CKPT_TASK", "named")
    hook(task_repo, "SessionStart", {**claude("SessionStart"), "session_id": "s2"})
    assert of_type(task_repo, "named", "session.start")[0]["data"]["task_from"] == "started"
    monkeypatch.delenv("GIT_CKPT_TASK")
    # two active tasks, none named after the branch, an unknown session: said, not raised
    out = hook(task_repo, "PostToolUse", {**claude("PostToolUse"), "session_id": "s3"})
    assert "2 active tasks" in out["systemMessage"]
    assert "GIT_CKPT_TASK" in out["systemMessage"]
    assert hooks_log(task_repo)[-1][2:4] == ["PostToolUse", "-"]


def test_compact_returns_the_brief_with_every_constraint_and_the_next_step(
    task_repo: Path,
) -> None:
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    specific = out["hookSpecificOutput"]
    assert specific["hookEventName"] == "SessionStart"
    context = specific["additionalContext"]
    assert "Experiments use seed 42, never another seed" in context
    assert "The report results/summary.md exists before a turn ends" in context
    assert PROSE.strip() in context
    assert "**Next step:** s1" in context
    assert "Run the seed ablation" in context
    assert "no `git ckpt resume` is needed" in context
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "active"  # changed nothing


def test_resume_runs_the_five_steps_and_returns_their_brief(task_repo: Path) -> None:
    write(task_repo / "results" / "summary.md", "the report\n")  # its block constraint passes
    ckpt(task_repo, "create", "-t", "exp", "-m", "the report written")
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="resume"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "task exp was resumed" in context
    assert "Experiments use seed 42, never another seed" in context
    assert "**Next step:** s1" in context
    assert "git ckpt confirm exp" in context
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "recovering"
    assert checkpoints(task_repo, "exp")[0]["trigger"] == "resume"
    assert hooks_log(task_repo)[-1][4].startswith("resume: ")


def test_resume_after_drift_reports_each_file_and_restores_nothing(task_repo: Path) -> None:
    (task_repo / "src" / "app.py").write_text("print('changed by the killed session')\n")
    (task_repo / "notes.txt").write_text("half-written\n")
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="resume"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "task exp was NOT resumed" in context
    assert "- modified: src/app.py" in context
    assert "- added: notes.txt" in context
    assert "git ckpt resume exp --restore" in context
    assert "git ckpt resume exp --accept-drift" in context
    assert "do not undo, redo or overwrite these files yourself" in context
    assert "Experiments use seed 42, never another seed" in context  # the recorded brief
    # nothing was restored
    assert (task_repo / "src" / "app.py").read_text() == "print('changed by the killed session')\n"
    assert (task_repo / "notes.txt").exists()
    # not ready until a person decides: no Stop checkpoint records the drift meanwhile
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "not_ready"
    assert hook(task_repo, "Stop", claude("Stop", stop_hook_active=False)) != {}
    assert "no checkpoint: the task is not ready" in hooks_log(task_repo)[-1][4]
    assert "resume" not in [c["trigger"] for c in checkpoints(task_repo, "exp")]
    assert all(c["trigger"] != "turn_end" for c in checkpoints(task_repo, "exp"))


def test_a_codex_session_that_stopped_cleanly_is_continued_not_recovered(
    task_repo: Path,
) -> None:
    """Issue 25, item 6: Codex sends no SessionEnd; `codex exec resume --last` after a
    clean exit ran the whole resume and left the task recovering. The Stop that let the
    last turn end is the clean end; a turn begun since (its prompt) and never stopped is a
    kill."""
    codex = {"session_id": "codex-1", "cwd": str(task_repo), "transcript_path": ""}
    hook(task_repo, "SessionStart", {**codex, "hook_event_name": "SessionStart"}, "codex")
    hook(task_repo, "UserPromptSubmit", {**codex, "hook_event_name": "UserPromptSubmit"}, "codex")
    write(task_repo / "results" / "summary.md", "turn one\n")
    hook(task_repo, "Stop", {**codex, "hook_event_name": "Stop"}, "codex")
    again = {**codex, "hook_event_name": "SessionStart", "source": "resume"}
    context = hook(task_repo, "SessionStart", again, "codex")["hookSpecificOutput"]
    assert "this session continues one that ended cleanly" in context["additionalContext"]
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "active"
    hook(task_repo, "UserPromptSubmit", {**codex, "hook_event_name": "UserPromptSubmit"}, "codex")
    write(task_repo / "notes.txt", "half-written by the killed turn\n")
    context = hook(task_repo, "SessionStart", again, "codex")["hookSpecificOutput"]
    assert "task exp was NOT resumed" in context["additionalContext"]


def test_continued_after_a_clean_end_gets_the_brief_and_no_resume(task_repo: Path) -> None:
    """`claude -p … --continue` fires SessionStart `resume` after every clean exit: the task's
    last session ended (SessionEnd), so the model gets the brief and nothing is recovered."""
    hook(task_repo, "SessionStart", claude("SessionStart", source="startup"))
    write(task_repo / "results" / "summary.md", "turn one\n")
    hook(task_repo, "Stop", claude("Stop", stop_hook_active=False))
    assert hook(task_repo, "SessionEnd", claude("SessionEnd", reason="other")) == {}
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="resume"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "this session continues one that ended cleanly" in context
    # issue 25, item 7: the agent replays every brief before; the newest says it holds
    assert context.startswith(
        "[git ckpt brief: it replaces every earlier git ckpt brief in this conversation, "
        "which no longer holds; where they differ, this one is right]\n"
    )
    assert "Experiments use seed 42, never another seed" in context
    assert "**Next step:** s1" in context
    assert "NOT resumed" not in context
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "active"
    assert "resume" not in [c["trigger"] for c in checkpoints(task_repo, "exp")]
    assert hooks_log(task_repo)[-1][4].startswith("resume: continued: ")


def test_after_a_kill_the_finished_turns_files_are_no_drift(task_repo: Path) -> None:
    """No SessionEnd (the agent was killed): the five steps run. What a finished turn wrote
    is in its Stop checkpoint, so only what the killed turn wrote is drift."""
    hook(task_repo, "SessionStart", claude("SessionStart", source="startup"))
    write(task_repo / "results" / "summary.md", "turn one\n")
    hook(task_repo, "Stop", claude("Stop", stop_hook_active=False))
    hook(task_repo, "UserPromptSubmit", claude("UserPromptSubmit", prompt="go on"))
    write(task_repo / "notes.txt", "half-written by the killed turn\n")
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="resume"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "task exp was NOT resumed" in context
    findings = context.split("For reference")[0]
    assert "- added: notes.txt" in findings
    assert "summary.md" not in findings


def _killed_after_a_write(repo: Path) -> None:
    """A finished turn, then a turn killed after its Write of notes/b.md (logged by
    PostToolUse) and before its Stop."""
    hook(repo, "SessionStart", claude("SessionStart", source="startup"))
    write(repo / "results" / "summary.md", "turn one\n")
    hook(repo, "Stop", claude("Stop", stop_hook_active=False))
    hook(repo, "UserPromptSubmit", claude("UserPromptSubmit", prompt="go on"))
    write(repo / "notes" / "b.md", "the killed turn's note\n")
    written = {"file_path": str(repo / "notes" / "b.md"), "content": "the killed turn's note\n"}
    call = claude("PostToolUse", tool_name="Write", tool_input=written, tool_use_id="toolu_b")
    hook(repo, "PostToolUse", call)


def test_the_killed_turns_own_logged_writes_are_no_drift(task_repo: Path) -> None:
    """Issue 25, item 5: what the killed turn's own logged Write left was drift a person
    had to decide on. It is the agent's own work: kept, named, and the task resumes."""
    _killed_after_a_write(task_repo)
    [call] = of_type(task_repo, "exp", "tool.call")
    assert call["data"]["files"] == {
        "notes/b.md": hashlib.sha256(b"the killed turn's note\n").hexdigest()
    }
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="resume"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "task exp was resumed (ready:" in context
    assert "- `notes/b.md`: kept (own logged write)" in context
    assert "NOT resumed" not in context
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "recovering"


def test_unexplained_drift_keeps_asking_the_person_until_one_decides(task_repo: Path) -> None:
    """Issue 25, items 5 and 6: after a kill the brief asked the person; the next
    `--continue` (a clean end before it) was simply continued. Every later brief now asks
    the same, no turn records the drift, and after the person's `--accept-drift` every
    brief says the task waits for its confirmation."""
    _killed_after_a_write(task_repo)
    write(task_repo / "notes" / "b.md", "changed again after the logged Write\n")
    write(task_repo / "src" / "app.py", "print('nobody the log knows')\n")
    first = hook(task_repo, "SessionStart", claude("SessionStart", source="resume"))
    findings = first["hookSpecificOutput"]["additionalContext"].split("For reference")[0]
    assert "task exp was NOT resumed: 2 source file(s) differ" in findings
    assert "- added: notes/b.md\n- modified: src/app.py\n" in findings
    # that turn ends cleanly: no checkpoint, and the person is told why
    hook(task_repo, "UserPromptSubmit", claude("UserPromptSubmit", prompt="go on"))
    stopped = hook(task_repo, "Stop", claude("Stop", stop_hook_active=False))
    assert stopped["systemMessage"].startswith(
        "git ckpt: no checkpoint of this turn: task exp is not ready: source files drifted"
    )
    triggers = [c["trigger"] for c in checkpoints(task_repo, "exp")]
    assert triggers == ["turn_end", "task_start"]  # the first turn's only, newest first
    # continued after that clean end, a compaction, a new session: each asks again
    again = {
        "resume": claude("SessionStart", source="resume"),
        "compact": claude("SessionStart", source="compact"),
        "startup": {**claude("SessionStart", source="startup"), "session_id": "other"},
    }
    for source, payload in again.items():
        context = hook(task_repo, "SessionStart", payload)["hookSpecificOutput"]
        text = context["additionalContext"].split("For reference")[0]
        assert "Task exp is still NOT resumed: its resume stopped (2 source" in text, source
        assert "ask the person again" in text and "- modified: src/app.py\n" in text, source
        assert "no `git ckpt resume` is needed" not in context["additionalContext"], source
    assert [c["trigger"] for c in checkpoints(task_repo, "exp")] == triggers
    # a person decides: every brief now says the task waits for the agent's restatement
    ckpt(task_repo, "resume", "exp", "--accept-drift")
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "Task exp WAITS FOR ITS RECOVERY TO BE CONFIRMED: task exp is recovering" in context
    assert "no `git ckpt resume` is needed" not in context
    assert "`git ckpt confirm exp --restatement FILE`" in context
    assert "\n- seed-42: " in context  # the restatement form, one line per constraint


def test_a_brief_that_cannot_be_built_still_points_the_model_at_its_rules(
    task_repo: Path,
) -> None:
    write(task_repo / ".agent" / "contracts" / "constraints.yaml", "constraints: [unclosed\n")
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "could not give the recovery brief of task exp" in context
    assert ".agent/contracts/" in context
    assert "constraints.yaml" in out["systemMessage"]
    assert hooks_log(task_repo)[-1][4].startswith("compact: error: ")


def test_compact_after_continue_the_sequence_claude_code_sends(
    task_repo: Path, tmp_path: Path
) -> None:
    """`claude -p /compact --continue`: SessionStart resume, PreCompact, SessionStart compact.
    While the task is recovering, PreCompact's checkpoint is taken all the same; the
    policy's and Stop's are not, and their hooks say so in the log, not to the agent."""
    write(task_repo / "results" / "summary.md", "the report\n")  # its block constraint passes
    ckpt(task_repo, "create", "-t", "exp", "-m", "the report written")
    hook(task_repo, "SessionStart", claude("SessionStart", source="resume", context_tokens=1002))
    assert ckpt_json(task_repo, "task", "show", "exp")["status"] == "recovering"
    assert hook(task_repo, "PreCompact", claude("PreCompact", trigger="manual")) == {}
    assert checkpoints(task_repo, "exp")[0]["trigger"] == "pre_compact"
    out = hook(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    assert "**Next step:** s1" in out["hookSpecificOutput"]["additionalContext"]
    full = claude_transcript(tmp_path / "full.jsonl", [{"cache_read_input_tokens": 190_000}])
    tool = claude("PostToolUse", tool_name="Read", transcript_path=str(full))
    assert hook(task_repo, "PostToolUse", tool) == {}  # the policy wants a full checkpoint
    assert "no checkpoint: the task is recovering" in hooks_log(task_repo)[-1][4]
    assert of_type(task_repo, "exp", "tool.call")[-1]["data"]["tool"] == "Read"
    hook(task_repo, "Stop", claude("Stop", stop_hook_active=True))
    assert checkpoints(task_repo, "exp")[0]["trigger"] == "pre_compact"
    starts = of_type(task_repo, "exp", "session.start")
    assert [e["data"]["source"] for e in starts] == ["resume", "compact"]
    assert starts[0]["data"]["context_tokens"] == 1002


def test_a_long_text_is_cut_with_a_note_saying_where_the_whole_is() -> None:
    short = fit("x" * 10, "`git ckpt report t r`")
    assert short == "x" * 10
    cut = fit("y" * (MAX_CONTEXT * 2), "`git ckpt report t r`")
    assert len(cut) == MAX_CONTEXT
    assert cut.endswith("the whole text: `git ckpt report t r`]")


# -- PreCompact, PostToolUse, UserPromptSubmit ----------------------------------------


def test_pre_compact_takes_a_full_checkpoint(task_repo: Path) -> None:
    (task_repo / "results.csv").write_text("seed,acc\n42,0.9\n")
    out = hook(task_repo, "PreCompact", claude("PreCompact", trigger="manual"))
    assert out == {}
    tip = checkpoints(task_repo, "exp")[0]
    assert (tip["trigger"], tip["kind"]) == ("pre_compact", "full")
    assert "results.csv" in git(task_repo, "ls-tree", "--name-only", tip["commit"])


def test_post_tool_use_logs_the_call_redacted_and_ticks_with_the_context_size(
    task_repo: Path, tmp_path: Path
) -> None:
    transcript = claude_transcript(
        tmp_path / "t.jsonl",
        [
            {"input_tokens": 5, "cache_read_input_tokens": 50, "output_tokens": 9},
            {
                "input_tokens": 10,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 200,
                "output_tokens": 30,
            },
        ],
    )
    payload = claude(
        "PostToolUse",
        transcript_path=str(transcript),
        tool_name="Write",
        tool_input={"file_path": "/tmp/proj/a.py", "content": f"KEY = '{TOKEN}'\n" + "x" * 9000},
        tool_response={"type": "create", "filePath": "/tmp/proj/a.py"},
        tool_use_id="toolu_0",
        duration_ms=8,
    )
    assert hook(task_repo, "PostToolUse", payload) == {}
    [call] = of_type(task_repo, "exp", "tool.call")
    assert call["data"]["tool"] == "Write" and call["data"]["status"] == "ok"
    assert call["data"]["tool_use_id"] == "toolu_0"
    assert call["input"]["file_path"] == "/tmp/proj/a.py"
    assert "more characters]" in call["input"]["content"]  # summarised, not the whole file
    assert call["output"] == {"type": "create", "filePath": "/tmp/proj/a.py"}
    assert call["actor"] == {"agent": "claude-code", "session": SESSION}
    raw = git(task_repo, "log", "--format=%B", "refs/agent/events/exp")
    assert TOKEN not in raw and TOKEN[:12] not in raw
    decision = of_type(task_repo, "exp", "trigger.decision")[-1]
    assert decision["data"]["signals"]["tokens_used"] == 1210
    assert decision["data"]["signals"]["token_budget"] == 200_000
    assert decision["data"]["signals"]["calls_since"] == 1


def test_codex_post_tool_use_reads_the_rollout_and_a_full_context_forces_a_checkpoint(
    task_repo: Path, tmp_path: Path
) -> None:
    rollout = codex_rollout(tmp_path / "rollout.jsonl", 170_000, 200_000)
    payload = {
        "session_id": SESSION,
        "hook_event_name": "PostToolUse",
        "transcript_path": str(rollout),
        "tool_name": "Bash",
        "tool_input": {"command": "python train.py --seed 42"},
        "tool_response": "epoch 1 acc 0.9\n",
    }
    assert hook(task_repo, "PostToolUse", payload, agent="codex") == {}
    call = of_type(task_repo, "exp", "tool.call")[-1]
    assert call["input"] == {"command": "python train.py --seed 42"}
    assert call["actor"]["agent"] == "codex"
    decision = of_type(task_repo, "exp", "trigger.decision")[-1]
    assert decision["data"]["signals"]["tokens_used"] == 170_000
    assert decision["data"]["signals"]["token_budget"] == 200_000
    tip = checkpoints(task_repo, "exp")[0]
    assert (tip["trigger"], tip["kind"]) == ("budget_threshold_0.80", "full")


def test_post_tool_use_failure_logs_the_error(task_repo: Path) -> None:
    payload = claude(
        "PostToolUseFailure", tool_name="Bash", tool_input={"command": "false"}, error="exit 1"
    )
    hook(task_repo, "PostToolUseFailure", payload)
    call = of_type(task_repo, "exp", "tool.call")[-1]
    assert (call["data"]["status"], call["output"]) == ("failed", "exit 1")


def test_user_prompt_submit_logs_the_prompt_redacted(task_repo: Path) -> None:
    payload = claude("UserPromptSubmit", prompt=f"use {TOKEN} for the api", permission_mode="x")
    assert hook(task_repo, "UserPromptSubmit", payload) == {}
    [prompt] = of_type(task_repo, "exp", "user.prompt")
    assert prompt["input"].startswith("use ") and TOKEN not in prompt["input"]
    assert prompt["data"]["permission_mode"] == "x"


# -- Stop, StopFailure, the rest --------------------------------------------------------


def test_stop_sends_a_failing_block_constraint_back_once(task_repo: Path) -> None:
    out = hook(task_repo, "Stop", claude("Stop", stop_hook_active=False))
    assert out["decision"] == "block"
    assert "report-exists" in out["reason"]
    assert "The report results/summary.md exists before a turn ends" in out["reason"]
    assert "seed-42" not in out["reason"]  # passing, and only a warning
    tip = checkpoints(task_repo, "exp")[0]
    assert (tip["trigger"], tip["kind"]) == ("turn_end", "full")
    assert of_type(task_repo, "exp", "constraint.check")
    # the agent went on because of this hook and still fails: it may stop now
    again = hook(task_repo, "Stop", claude("Stop", stop_hook_active=True))
    assert "decision" not in again
    assert "report-exists" in again["systemMessage"]
    # fixed: nothing to say
    write(task_repo / "results" / "summary.md", "done\n")
    assert hook(task_repo, "Stop", claude("Stop", stop_hook_active=False)) == {}


def test_codex_stop_uses_the_same_block_answer(task_repo: Path) -> None:
    payload = {"session_id": SESSION, "hook_event_name": "Stop", "turn_id": "1"}
    out = hook(task_repo, "Stop", payload, agent="codex")
    assert out["decision"] == "block" and "report-exists" in out["reason"]


def test_stop_failure_rate_limit_takes_a_quota_checkpoint_and_logs_the_error(
    task_repo: Path,
) -> None:
    payload = claude("StopFailure", error="rate_limit", error_details="429 Too Many Requests")
    assert hook(task_repo, "StopFailure", payload) == {}
    [quota] = of_type(task_repo, "exp", "quota")
    assert quota["data"]["error"] == "rate_limit"
    assert quota["data"]["error_details"] == "429 Too Many Requests"
    tip = checkpoints(task_repo, "exp")[0]
    assert (tip["trigger"], tip["kind"]) == ("quota", "full")
    brief = hook(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    assert "rate_limit" in brief["hookSpecificOutput"]["additionalContext"]  # why it stopped
    hook(task_repo, "StopFailure", claude("StopFailure", error="overloaded"))
    assert of_type(task_repo, "exp", "error")[0]["data"]["error"] == "overloaded"
    assert checkpoints(task_repo, "exp")[0]["trigger"] == "error"


RATE_LIMITED = {  # the last line of a real `claude -p` transcript cut off by HTTP 429
    "type": "assistant",
    "isApiErrorMessage": True,
    "error": "rate_limit",
    "apiErrorStatus": 429,
    "apiErrorType": "rate_limit_error",
    "message": {
        "model": "<synthetic>",
        "role": "assistant",
        "content": [{"type": "text", "text": "API Error: Request rejected (429)"}],
    },
}


def test_a_session_ended_by_a_usage_limit_gets_its_quota_checkpoint(
    task_repo: Path, tmp_path: Path
) -> None:
    """`claude -p` hit by a usage limit fires no Stop and no StopFailure, only SessionEnd:
    the transcript's last answer says why, and SessionEnd does what StopFailure would."""
    transcript = claude_transcript(tmp_path / "t.jsonl", [{"input_tokens": 900}])
    with transcript.open("a") as fh:
        fh.write(json.dumps(RATE_LIMITED) + "\n")
    end = claude("SessionEnd", reason="other", transcript_path=str(transcript))
    assert hook(task_repo, "SessionEnd", end) == {}
    [quota] = of_type(task_repo, "exp", "quota")
    assert (quota["data"]["error"], quota["data"]["status"]) == ("rate_limit", 429)
    assert "Request rejected (429)" in quota["data"]["error_message"]
    assert (checkpoints(task_repo, "exp")[0]["trigger"]) == "quota"
    assert of_type(task_repo, "exp", "session.end")
    # a StopFailure that already said it is not said twice
    hook(task_repo, "SessionStart", claude("SessionStart", source="startup"))
    hook(task_repo, "StopFailure", claude("StopFailure", error="rate_limit"))
    hook(task_repo, "SessionEnd", end)
    assert len(of_type(task_repo, "exp", "quota")) == 2
    # a session that ended on a real answer is only a session.end
    plain = claude_transcript(tmp_path / "plain.jsonl", [{"input_tokens": 900}])
    hook(task_repo, "SessionStart", claude("SessionStart", source="startup"))
    hook(task_repo, "SessionEnd", claude("SessionEnd", transcript_path=str(plain)))
    assert len(of_type(task_repo, "exp", "quota")) == 2


def test_session_end_post_compact_and_unknown_events(task_repo: Path) -> None:
    assert hook(task_repo, "SessionEnd", claude("SessionEnd", reason="exit")) == {}
    assert of_type(task_repo, "exp", "session.end")[0]["data"]["reason"] == "exit"
    summary = {"trigger": "auto", "compact_summary": "we did s1"}
    assert hook(task_repo, "PostCompact", claude("PostCompact", **summary)) == {}
    assert of_type(task_repo, "exp", "context.compacted")[0]["data"] == summary
    before = len(events(task_repo, "exp"))
    assert hook(task_repo, "SubagentStop", claude("SubagentStop")) == {}
    assert len(events(task_repo, "exp")) == before
    assert hooks_log(task_repo)[-1][4].startswith("ignored")


def test_the_event_comes_from_the_payload_when_not_named(task_repo: Path) -> None:
    result = ckpt(task_repo, "hook", "codex", input=json.dumps(claude("UserPromptSubmit")))
    assert json.loads(result.stdout) == {}
    assert of_type(task_repo, "exp", "user.prompt")


# -- never a traceback ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ("{}", "no event named"),
    ],
)
def test_bad_stdin_is_answered_in_json_and_logged(task_repo: Path, stdin: str, said: str) -> None:
    result = ckpt(task_repo, "hook", "claude-code", input=stdin)
    assert result.exit_code == 0
    assert said in json.loads(result.stdout)["systemMessage"]
    line = hooks_log(task_repo)[-1]
    assert line[1] == "claude-code" and line[4].startswith("error: ")
    assert line[5].endswith("ms")


def test_outside_a_repository_and_bad_utf8_are_answered_too(
    tmp_path: Path, task_repo: Path
) -> None:
    proc = real_ckpt(tmp_path, "hook", "claude-code", "Stop", input="{}")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "not a git repository" in json.loads(proc.stdout)["systemMessage"].lower()
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    raw = subprocess.run(
        ["git", "ckpt", "hook", "claude-code", "Stop"],
        cwd=task_repo, env=env, input=b'{"a": "\xff"}', capture_output=True, check=False,
    )  # fmt: skip
    assert raw.returncode == 0
    assert "not UTF-8" in json.loads(raw.stdout)["systemMessage"]


def test_a_refused_write_is_answered_not_raised(
    task_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task another worktree owns: the store refuses the checkpoint; the hook says so."""
    other = task_repo.parent / "other"
    git(task_repo, "worktree", "add", "-q", str(other))
    monkeypatch.setenv("GIT_CKPT_TASK", "exp")
    out = hook(other, "PreCompact", claude("PreCompact", trigger="auto"))
    assert "belongs to the worktree" in out["systemMessage"]
    assert hooks_log(other)[-1][4].startswith("error: ")


# -- in its own process, and through the daemon ----------------------------------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from serving(monkeypatch, tmp_path)


def _real(repo: Path, event: str, payload: dict[str, Any], agent: str = "claude-code") -> Any:
    proc = real_ckpt(repo, "hook", agent, event, input=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_in_its_own_process(task_repo: Path) -> None:
    out = _real(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    assert "**Next step:** s1" in out["hookSpecificOutput"]["additionalContext"]
    assert _real(task_repo, "Stop", claude("Stop"))["decision"] == "block"
    bad = real_ckpt(task_repo, "hook", "claude-code", "Stop", input="{oops")
    assert bad.returncode == 0 and "not JSON" in json.loads(bad.stdout)["systemMessage"]


def test_served_by_a_warm_daemon(task_repo: Path, served: None) -> None:
    ckpt(task_repo, "daemon", "start")
    before = running_status(task_repo)["served"]
    out = _real(task_repo, "SessionStart", claude("SessionStart", source="compact"))
    assert "Experiments use seed 42" in out["hookSpecificOutput"]["additionalContext"]
    payload = claude(
        "PostToolUse", tool_name="Write", tool_input={"file_path": "b", "content": TOKEN}
    )
    assert _real(task_repo, "PostToolUse", payload) == {}
    assert TOKEN not in git(task_repo, "log", "--format=%B", "refs/agent/events/exp")
    bad = real_ckpt(task_repo, "hook", "claude-code", "Stop", input="{oops")
    assert bad.returncode == 0 and "not JSON" in json.loads(bad.stdout)["systemMessage"]
    assert running_status(task_repo)["served"] >= before + 3


# -- the pieces -----------------------------------------------------------------------


def test_the_transcript_is_read_from_its_end_only(tmp_path: Path) -> None:
    usage = {"input_tokens": 1, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 3}
    path = claude_transcript(tmp_path / "t.jsonl", [usage])
    filler = json.dumps({"type": "user", "message": {"content": "z" * 1000}}) + "\n"
    with path.open("a") as fh:  # a line crossing every 64 KiB block, then 5 MiB more
        fh.write(filler * (MAX_TAIL // len(filler) + 1024))
    assert last_usage(str(path), "claude-code") is None  # beyond the 4 MiB tail: not read
    with path.open("a") as fh:
        big = {"input_tokens": 7, "cache_read_input_tokens": 70_000, "x": "y" * 100_000}
        fh.write(json.dumps({"type": "assistant", "message": {"usage": big}}) + "\n")
        fh.write(filler)
    found = last_usage(str(path), "claude-code")
    assert found is not None and found.tokens == 70_007 and found.window is None
    assert last_usage(str(tmp_path / "missing.jsonl"), "claude-code") is None
    rollout = codex_rollout(tmp_path / "r.jsonl", 1234, 272_000)
    found = last_usage(str(rollout), "codex")
    assert found is not None and (found.tokens, found.window) == (1234, 272_000)


def test_a_secret_across_the_cut_is_redacted_whole(task_repo: Path) -> None:
    """The summary cuts long strings at 2000 characters: the secret is redacted before
    the cut, so no prefix of it is left in the store."""
    content = "x" * 1990 + " " + TOKEN + " " + "y" * 5000
    payload = claude("PostToolUse", tool_name="Write", tool_input={"content": content})
    assert hook(task_repo, "PostToolUse", payload) == {}
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=task_repo, capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert b"x" * 1990 in objects  # the call was logged
    assert TOKEN[:8].encode() not in objects


def test_summaries_keep_short_values_and_cut_long_ones() -> None:
    value = {"path": "a/b.py", "n": 3, "ok": True, "text": "x" * 50_000, "list": list(range(100))}
    small = summarise(value)
    assert isinstance(small, dict)
    assert (small["path"], small["n"], small["ok"]) == ("a/b.py", 3, True)
    assert str(small["text"]).endswith("more characters]")
    assert isinstance(small["list"], list) and small["list"][-1] == "…[60 more items]"
    assert len(json.dumps(small)) <= 8 * 1024


@pytest.mark.mode("once", reason="pure functions on files: no git ckpt command")
def test_what_a_file_tool_wrote_is_found_in_its_input(tmp_path: Path) -> None:
    from git_agentckpt.integrations.own_writes import files_written

    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("a = 1\n")
    (work / "b.txt").write_text("b\n")
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-a = 0\n+a = 1\n"
        "*** Update File: old.txt\n*** Move to: b.txt\n*** Delete File: gone.txt\n"
        "*** Add File: ../outside.txt\n+x\n*** Add File: .git/config\n+x\n*** End Patch\n"
    )
    found = files_written("apply_patch", {"command": patch}, str(work), str(work))
    assert set(found) == {"src/a.py", "old.txt", "b.txt", "gone.txt"}  # not outside, not .git
    assert found["gone.txt"] is None and found["old.txt"] is None  # no longer there
    assert found["src/a.py"] == hashlib.sha256(b"a = 1\n").hexdigest()
    write_call = {"file_path": str(work / "src" / "a.py"), "content": "a = 1\n"}
    assert list(files_written("Write", write_call, "/elsewhere", str(work))) == ["src/a.py"]
    edits = {"file_path": "src/a.py", "edits": []}  # relative: to the call's cwd
    assert list(files_written("MultiEdit", edits, str(work), str(work))) == ["src/a.py"]
    assert files_written("Bash", {"command": "echo > b.txt"}, str(work), str(work)) == {}
    os.mkfifo(work / "pipe")  # never waited on
    assert files_written("Write", {"file_path": "pipe"}, str(work), str(work)) == {"pipe": ""}
