"""One damaged or forged record affects only its own task (issue 9, items 4, 7, 8, 9).

- tool-only event types are refused from outside; replay reports and skips an
  event the state cannot take instead of dying on it;
- a note that claims steps done with no step-end checkpoint behind it is
  reported as suspect and not trusted by resume;
- a damaged checkpoint, ref, note or event commit of one task is named and
  skipped: every other task keeps working, and sharing carries everything else;
- the write-ahead guard finds a checkpoint's prepare however far back it is.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, forge_event, remote_and_clones, write

import git_agentckpt
from git_agentckpt.errors import BadStateError
from git_agentckpt.model import NewEvent
from git_agentckpt.store.refs import TaskName

TOOL_ONLY = [
    "task.start",
    "state.update",
    "step.start",
    "step.end",
    "checkpoint.prepare",
    "checkpoint.commit",
    "checkpoint.abort",
    "recovery.confirmed",
    "workspace.restore",
    "constraint.check",
    "drift.suspected",
    "trigger.decision",
]

SEED42 = "constraints:\n  - id: seed42\n    text: Experiments use seed 42\n"


def start(repo: Path, task: str = "t") -> None:
    # a constraint id given to `task start` must be defined by the contract
    write(repo / ".agent" / "contracts" / "constraints.yaml", SEED42)
    ckpt(
        repo,
        "task",
        "start",
        task,
        "--goal",
        "g",
        "--step",
        "s1:one",
        "--step",
        "s2:two",
        "--constraint",
        "seed42",
    )


def count_events(repo: Path, task: str = "t") -> int:
    return len(ckpt(repo, "log", task, "--json").stdout.splitlines())


def resume_json(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = ckpt(repo, "resume", "t", "--json", *args, ok=False)
    return result.exit_code, json.loads(result.stdout)


# -- item 8: the tool's own events ----------------------------------------------------


@pytest.mark.parametrize("type_", TOOL_ONLY)
def test_tool_only_event_types_are_refused_from_outside(repo: Path, type_: str) -> None:
    start(repo)
    before = count_events(repo)
    payload = json.dumps({"step": "s1", "patch": {"goal": "x"}, "state": {"v": 1}})
    bad = ckpt(repo, "event", "t", "--type", type_, "--json", payload, ok=False)
    assert bad.exit_code == 2
    assert f"event type {type_!r} is written by git ckpt itself" in bad.stderr
    with pytest.raises(BadStateError):
        git_agentckpt.open(str(repo)).append_events("t", [{"type": type_}])
    assert count_events(repo) == before


def test_own_event_types_still_append(repo: Path) -> None:
    start(repo)
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", '{"input": "ls"}')
    ckpt(repo, "event", "t", "--type", "model.call", "--json", '{"output": "ok"}')
    types = [json.loads(x)["type"] for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()]
    assert types[-2:] == ["tool.call", "model.call"]


def test_a_state_patch_cannot_mark_a_step_done(repo: Path) -> None:
    start(repo)
    bad = ckpt(
        repo,
        "create",
        "-t",
        "t",
        "--state",
        '{"steps": [{"id": "s1", "status": "done"}]}',
        ok=False,
    )
    assert bad.exit_code == 2 and "cannot move step 's1' from pending to done" in bad.stderr
    assert "run `git ckpt step done t s1`" in bad.stderr
    bad = ckpt(repo, "create", "-t", "t", "--state", '{"status": "done"}', ok=False)
    assert bad.exit_code == 2 and "cannot move the task from active to done" in bad.stderr
    state = ckpt_json(repo, "task", "show", "t")
    assert state["done"] == [] and state["status"] == "active"


def test_a_bad_state_update_is_skipped_and_reported_not_fatal(repo: Path) -> None:
    start(repo)
    forge_event(repo, "t", "state.update", {"patch": {"steps": "nope"}})
    shown = ckpt(repo, "task", "show", "t")
    assert shown.exit_code == 0
    assert "warning: task t: event #" in shown.stderr and "state.update" in shown.stderr
    # everything that replays the state keeps working, for good
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "create", "-t", "t", "-m", "after the bad event")
    ckpt(repo, "step", "done", "t", "s1")
    assert ckpt_json(repo, "task", "show", "t")["done"] == ["s1"]
    code, out = resume_json(repo)
    assert code == 0 and out["outcome"] == "ready"


def test_a_forged_state_update_cannot_mark_a_step_done(repo: Path) -> None:
    start(repo)
    forge_event(repo, "t", "state.update", {"patch": {"steps": [{"id": "s1", "status": "done"}]}})
    state = ckpt_json(repo, "task", "show", "t")
    assert state["done"] == [] and state["steps"][0]["status"] == "pending"


def test_a_forged_task_start_does_not_replace_the_state(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    ckpt(repo, "step", "start", "t", "s2")
    forged = {
        "v": 1,
        "task": "t",
        "goal": "other",
        "steps": [{"id": "x", "title": "x"}],
        "constraints": [],
    }
    forge_event(repo, "t", "task.start", {"state": forged})
    shown = ckpt(repo, "task", "show", "t", "--json")
    state = json.loads(shown.stdout)
    assert state["goal"] == "g" and state["constraints"] == ["seed42"]
    assert state["done"] == ["s1"] and state["current_step"] == "s2"
    assert "task.start after the task started" in shown.stderr


def test_a_forged_prepare_cannot_slip_a_checkpoint_past_the_hook(repo: Path) -> None:
    start(repo)
    ckpt(repo, "hooks", "install")
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/t")
    msg = git(repo, "log", "-1", "--format=%B", tip).replace("Seq: 1", "Seq: 2")
    forged = git(repo, "commit-tree", "-p", tip, "-m", msg, f"{tip}^{{tree}}")
    bad = ckpt(
        repo,
        "event",
        "t",
        "--type",
        "checkpoint.prepare",
        "--json",
        json.dumps({"checkpoint": forged}),
        ok=False,
    )
    assert bad.exit_code == 2
    moved = subprocess.run(
        ["git", "update-ref", "refs/agent/checkpoints/t", forged, tip],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert moved.returncode != 0 and "no checkpoint.prepare event" in moved.stderr
    assert git(repo, "rev-parse", "refs/agent/checkpoints/t") == tip


# -- item 7: a forged note ------------------------------------------------------------


def test_a_note_claiming_every_step_done_is_suspect_and_not_trusted(repo: Path) -> None:
    start(repo)
    ckpt(repo, "create", "-t", "t", "-m", "work")
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/t")
    note = json.loads(git(repo, "notes", "--ref=agent/state", "show", tip))
    for s in note["steps"]:
        s["status"] = "done"
    note["status"] = "done"
    git(repo, "notes", "--ref=agent/state", "add", "-f", "-m", json.dumps(note), tip)
    shown = ckpt(repo, "task", "show", "t")
    assert "suspect state: step s1 is marked done" in shown.stderr
    code, out = resume_json(repo)
    assert code == 0 and out["outcome"] == "ready"  # not "finished"
    assert {c["step"] for c in out["suspect_state"]} == {"s1", "s2", None}
    assert out["brief"]["next_step"] == "s1"
    assert "step s1 is marked done, but no step-end checkpoint" in out["brief_markdown"]
    resumed = ckpt_json(repo, "task", "show", "t")
    assert resumed["done"] == []


def test_a_real_completion_is_not_suspect(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    assert git_agentckpt.open(str(repo)).suspect_claims("t") == []
    code, out = resume_json(repo)
    assert code == 0 and "suspect_state" not in out
    assert out["brief"]["next_step"] == "s2"


# -- item 4: damaged records of one task ----------------------------------------------


def damage_seq(repo: Path, task: str) -> str:
    tip = git(repo, "rev-parse", f"refs/agent/checkpoints/{task}")
    msg = git(repo, "log", "-1", "--format=%B", tip)
    msg = "\n".join("Seq: abc" if x.startswith("Seq: ") else x for x in msg.splitlines())
    bad = git(repo, "commit-tree", "-p", tip, "-m", msg, f"{tip}^{{tree}}")
    git(repo, "update-ref", f"refs/agent/checkpoints/{task}", bad)
    return bad


def other_tasks_still_work(repo: Path, damaged: str, *, in_list: bool = True) -> None:
    listed = ckpt(repo, "list")
    assert listed.exit_code == 0 and "good~0" in listed.stdout
    assert (f"warning: task {damaged}:" in listed.stderr) == in_list
    tasks = ckpt(repo, "task", "list", "--json")
    assert "good" in [r["task"] for r in json.loads(tasks.stdout)]
    assert damaged not in [r["task"] for r in json.loads(tasks.stdout)]
    assert f"warning: task {damaged}:" in tasks.stderr
    good_id = ckpt_json(repo, "list", "good")[0]["id"]
    assert ckpt_json(repo, "show", good_id)["checkpoint"]["task"] == "good"
    assert ckpt(repo, "restore", "good", "--dry-run").exit_code == 0
    assert ckpt(repo, "resume", "good", "--json", ok=False).exit_code == 0
    ckpt(repo, "create", "-t", "good", "-m", "still fine", "--force")


@pytest.fixture
def two_tasks(repo: Path) -> Path:
    start(repo, "good")
    start(repo, "bad")
    return repo


def test_a_malformed_seq_trailer_hides_only_its_own_checkpoint(two_tasks: Path) -> None:
    repo = two_tasks
    bad = damage_seq(repo, "bad")
    other_tasks_still_work(repo, "bad")
    # the damaged task lists what is intact and names the damaged checkpoint
    own = ckpt(repo, "list", "bad")
    assert own.exit_code == 0 and "bad~0" in own.stdout
    assert f"checkpoint {bad[:12]} of task 'bad' has a malformed Seq trailer 'abc'" in own.stderr


@pytest.mark.parametrize("what", ["dangling", "tree", "blob"])
def test_a_ref_at_a_missing_or_non_commit_object_hides_only_its_task(
    two_tasks: Path, what: str
) -> None:
    repo = two_tasks
    ref = repo / ".git" / "refs" / "agent" / "checkpoints" / "bad"
    target = {
        "dangling": "1234567890" * 4,
        "tree": git(repo, "rev-parse", "HEAD^{tree}"),
        "blob": git(repo, "rev-parse", "HEAD:README.md"),
    }[what]
    ref.write_text(target + "\n")
    other_tasks_still_work(repo, "bad")
    own = ckpt(repo, "list", "bad", ok=False)
    assert own.exit_code == 6
    assert "refs/agent/checkpoints/bad points at" in own.stderr
    assert "Traceback" not in own.stderr


@pytest.mark.parametrize(
    "payload,why",
    [
        (b"\xff\xfe not utf-8", "is not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "too deeply"),
        (b"{not json", "is not JSON"),
    ],
)
def test_a_damaged_note_is_a_clear_error_for_its_task_only(
    two_tasks: Path, payload: bytes, why: str
) -> None:
    repo = two_tasks
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/bad")
    blob = (
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=repo,
            input=payload,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    git(repo, "notes", "--ref=agent/state", "add", "-f", "-C", blob, tip)
    own = ckpt(repo, "task", "show", "bad", ok=False)
    assert own.exit_code == 6 and why in own.stderr and "internal error" not in own.stderr
    other_tasks_still_work(repo, "bad", in_list=False)


NESTED_EVENT = '{"v": 1, "id": "x", "seq": 2, "data": ' + "[" * 50_000 + "]" * 50_000 + "}"


def bad_event_commit(repo: Path, task: str, body: str) -> None:
    ref = f"refs/agent/events/{task}"
    tip = git(repo, "rev-parse", ref)
    tree = git(repo, "rev-parse", f"{tip}^{{tree}}")
    commit = git(repo, "commit-tree", "-p", tip, "-m", f"#99 tool.call\n\n{body}", tree)
    git(repo, "update-ref", ref, commit)


def good_and_bad_pushed_by_git(a: Path, body: str) -> None:
    """Tasks `good` and `bad` (its last event commit holds `body`), pushed by plain git."""
    start(a, "good")
    start(a, "bad")
    bad_event_commit(a, "bad", body)
    refs = ("refs/agent/*:refs/agent/*", "refs/notes/agent/*:refs/notes/agent/*")
    git(a, "push", "-q", "origin", *refs)


@pytest.mark.parametrize(
    "body",
    ['{"v": 1, "id": "x", "seq": ', NESTED_EVENT, '{"v": 7, "id": "x", "seq": 1}'],
)
def test_a_malformed_event_commit_blocks_only_its_task_when_shared(
    tmp_path: Path, body: str
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", str(remote), str(clone))
    (a / "f").write_text("x\n")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "initial")
    git(a, "push", "-q", "origin", "HEAD:refs/heads/main")
    git(b, "pull", "-q", "origin", "main")
    good_and_bad_pushed_by_git(a, body)
    fetched = ckpt(b, "fetch", "--json", ok=False)
    assert fetched.exit_code == 6
    doc = json.loads(fetched.stdout)
    actions = {r["ref"]: r["action"] for r in doc["fetched"]}
    assert actions["refs/agent/events/good"] == "created"
    assert actions["refs/agent/checkpoints/good"] == "created"
    assert actions["refs/agent/events/bad"] == "damaged"
    assert "refs/agent/events/bad damaged" in fetched.stderr
    assert ckpt_json(b, "task", "show", "good")["goal"] == "g"
    # and b can still share its own work: everything but the damaged task goes out
    ckpt(b, "event", "good", "--type", "note", "--json", '{"n": 1}')
    pushed = ckpt(b, "push", "--json", ok=False)
    assert pushed.exit_code == 6
    refs = {p["ref"] for p in json.loads(pushed.stdout)["pushed"]}
    assert "refs/agent/events/good" in refs and "refs/agent/events/bad" not in refs


# -- issue 26 item 7: one bad ref of this clone blocks nothing else -----------------------


def pushed_refs(result: Any) -> set[str]:
    return {p["ref"] for p in json.loads(result.stdout)["pushed"]}


def test_a_ref_at_a_missing_object_is_named_and_the_rest_is_shared(tmp_path: Path) -> None:
    """A checkpoint ref of this clone at an object it does not hold made every `fetch`
    and `push` exit 1 ("did not send all necessary objects"): git's connectivity check
    lists every ref. It is named, left out, and the rest is shared (exit 6)."""
    remote, a, b = remote_and_clones(tmp_path)
    start(a, "t")
    ckpt(a, "push")
    missing = "1" * 40
    (a / ".git" / "refs" / "agent" / "checkpoints" / "lost").write_text(missing + "\n")
    ckpt(a, "event", "t", "--type", "note", "--json", '{"after": "the damage"}')
    pushed = ckpt(a, "push", "--json", ok=False)
    assert pushed.exit_code == 6, pushed.output
    doc = json.loads(pushed.stdout)
    lost = [r for r in doc["fetched"] if r["ref"] == "refs/agent/checkpoints/lost"]
    assert lost == [
        {
            "ref": "refs/agent/checkpoints/lost",
            "action": "damaged",
            "detail": "points at 111111111111, which is not a commit stored here",
            "local": True,
        }
    ]
    assert "refs/agent/events/t" in pushed_refs(pushed)
    assert "refs/agent/checkpoints/lost" not in pushed_refs(pushed)
    assert (
        "not shared: refs/agent/checkpoints/lost damaged here (points at 111111111111"
        in pushed.stderr
    )
    assert git(remote, "rev-parse", "refs/agent/events/t") == git(
        a, "rev-parse", "refs/agent/events/t"
    )
    fetched = ckpt(a, "fetch", ok=False)
    assert fetched.exit_code == 6 and "did not send all necessary objects" not in fetched.output
    assert "refs/agent/checkpoints/lost  damaged here: points at 111111111111" in fetched.stdout
    # the other clone gets the event logged after the damage
    ckpt(b, "fetch")
    lines = ckpt(b, "log", "t", "--json").stdout.splitlines()
    logged = [e["data"] for e in map(json.loads, lines) if e["type"] == "note"]
    assert logged == [{"after": "the damage"}]


def test_a_malformed_event_commit_pushed_blocks_only_its_task(tmp_path: Path) -> None:
    """A malformed event commit of task `bad`, pushed by plain git: every later `push`
    of the clone that holds it exited 6 naming no ref, and `metrics --all` exited 6 for
    every task. The damaged log is named and left out with its task's checkpoint ref;
    the rest is pushed; metrics count every other task."""
    remote, a, _ = remote_and_clones(tmp_path, clone_b=False)
    good_and_bad_pushed_by_git(a, '{"v": 1, "id": "x", "seq": ')
    ckpt(a, "event", "good", "--type", "note", "--json", '{"n": 1}')
    pushed = ckpt(a, "push", "--json", ok=False)
    assert pushed.exit_code == 6, pushed.output
    assert "refs/agent/events/bad damaged here (event log commit" in pushed.stderr
    assert "with its task's checkpoint and reports" in pushed.stderr
    sent = pushed_refs(pushed)
    assert "refs/agent/events/good" in sent
    assert not {"refs/agent/events/bad", "refs/agent/checkpoints/bad"} & sent
    assert git(remote, "rev-parse", "refs/agent/events/good") == git(
        a, "rev-parse", "refs/agent/events/good"
    )
    every = ckpt(a, "metrics", "--all", "--json")
    assert [row["task"] for row in json.loads(every.stdout)["tasks"]] == ["good"]
    assert "warning: task bad: event log commit" in every.stderr
    assert "holds malformed JSON (skipped)" in every.stderr
    named = ckpt(a, "metrics", "bad", ok=False)
    assert named.exit_code == 6 and "holds malformed JSON" in named.stderr


# -- item 9: the guard remembers however far back --------------------------------------


def test_the_guard_finds_a_prepare_more_than_10000_events_back(tmp_path: Path) -> None:
    remote, a, b = remote_and_clones(tmp_path, clone_b=False)
    start(a)
    ck = git_agentckpt.open(str(a))
    log = ck.log
    for batch in range(11):  # 11,000 events after the checkpoint's prepare
        log.append(
            TaskName("t"),
            [NewEvent("tool.call", input={"i": batch * 1000 + i}) for i in range(1000)],
        )
    ckpt(a, "hooks", "install")
    pushed = ckpt(a, "push", "--json")
    refs = {p["ref"] for p in json.loads(pushed.stdout)["pushed"]}
    assert "refs/agent/checkpoints/t" in refs
    git(tmp_path, "clone", "-q", str(remote), str(b))
    ckpt(b, "hooks", "install")
    fetched = ckpt_json(b, "fetch")
    actions = {r["ref"]: r["action"] for r in fetched["fetched"]}
    assert actions["refs/agent/checkpoints/t"] == "created", fetched
    assert git(b, "rev-parse", "refs/agent/checkpoints/t") == git(
        a, "rev-parse", "refs/agent/checkpoints/t"
    )
