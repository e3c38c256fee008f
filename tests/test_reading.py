"""list, show, log, diff and the ways to name a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import ckpt, ckpt_json, write


def three(repo: Path) -> list[dict[str, object]]:
    ckpt(repo, "task", "start", "exp", "--goal", "g")
    made = [ckpt_json(repo, "create", "-t", "exp", "-m", "a")]
    write(repo / "src" / "app.py", "print(2)\n")
    write(repo / "new.txt", "n\n")
    made.append(ckpt_json(repo, "create", "-t", "exp", "-m", "b"))
    (repo / "README.md").unlink()
    made.append(
        ckpt_json(
            repo,
            "create",
            "-t",
            "exp",
            "-m",
            "c",
            "--step",
            "s1",
            "--state",
            '{"steps": [{"id": "s1", "title": "t"}]}',
        )
    )
    return made


def test_names_of_a_checkpoint(repo: Path) -> None:
    made = three(repo)
    assert ckpt_json(repo, "show", "exp")["checkpoint"]["commit"] == made[2]["commit"]
    assert ckpt_json(repo, "show", "exp~2")["checkpoint"]["commit"] == made[0]["commit"]
    assert ckpt_json(repo, "show", str(made[1]["id"]))["checkpoint"]["commit"] == made[1]["commit"]
    prefix = str(made[1]["commit"])[:10]
    assert ckpt_json(repo, "show", prefix)["checkpoint"]["commit"] == made[1]["commit"]
    missing = ckpt(repo, "show", "exp~9", ok=False)
    assert missing.exit_code == 3 and "only 4 checkpoints" in missing.stderr  # and its start
    unknown = ckpt(repo, "show", "nope", ok=False)
    assert unknown.exit_code == 3 and "git ckpt list" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_list_and_log(repo: Path) -> None:
    made = three(repo)
    listed = ckpt_json(repo, "list", "exp")
    assert [c["commit"] for c in listed][:3] == [m["commit"] for m in reversed(made)]
    assert listed[3]["trigger"] == "task_start"
    text = ckpt(repo, "list").stdout
    assert "exp~0" in text and "exp~2" in text
    lines = ckpt(repo, "log", "exp", "--json").stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert all({"id", "seq", "ts", "type", "task"} <= set(e) for e in events)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(ckpt(repo, "log", "exp", "-n", "2", "--json").stdout.splitlines()) == 2
    assert "checkpoint.commit" in ckpt(repo, "log", "exp").stdout


def test_diff_files_and_state(repo: Path) -> None:
    three(repo)
    d = ckpt_json(repo, "diff", "exp~2", "exp")
    files = {(f["status"], f["path"]) for f in d["files"]}
    assert files == {("M", "src/app.py"), ("A", "new.txt"), ("D", "README.md")}
    fields = {s["field"] for s in d["state"]}
    assert "steps.s1" in fields
    text = ckpt(repo, "diff", "exp~2", "exp").stdout
    assert "A\tnew.txt" in text


def test_event_command_and_batches(repo: Path) -> None:
    from conftest import git

    import git_agentckpt

    ckpt(repo, "task", "start", "exp", "--goal", "g")  # `event` never starts a task
    start_events = len(ckpt(repo, "log", "exp", "--json").stdout.splitlines())
    start_commits = len(git(repo, "log", "--format=%s", "refs/agent/events/exp").splitlines())
    out = ckpt(
        repo,
        "event",
        "exp",
        "--type",
        "tool.call",
        "--json",
        '{"input": {"cmd": "pytest"}, "output": "ok", "step": "s1"}',
        "--actor",
        "codex",
    )
    ev_id, seq = out.stdout.split()
    assert len(ev_id) == 26 and seq == str(start_events + 1)
    ck = git_agentckpt.open(str(repo))
    written = ck.append_events("exp", [{"type": "model.call", "input": "q"}, {"type": "tool.call"}])
    assert [e.seq for e in written] == [start_events + 2, start_events + 3]
    events = ck.events("exp")[start_events:]
    assert events[0].actor == {"agent": "codex"} and events[0].links == {"step": "s1"}
    assert events[0].input == {"cmd": "pytest"}
    # one readable line per commit: the batch is one commit
    subjects = git(repo, "log", "--format=%s", "refs/agent/events/exp").splitlines()
    assert len(subjects) == start_commits + 2
    bad = ckpt(repo, "event", "exp", "--type", "Bad Type", ok=False)
    assert bad.exit_code == 2
    bad = ckpt(repo, "event", "exp", "--type", "x.y", "--json", "{nope", ok=False)
    assert bad.exit_code == 2 and "not valid JSON" in bad.stderr
