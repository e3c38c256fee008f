"""`git ckpt verify` across clones: shared trails pass, rollbacks are caught only by a copy
kept elsewhere (the fetch mirror, `--against REMOTE`, the witness file), bare repositories
and a real pre-receive hook calling `api.verify_pushed` on quarantined objects."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, remote_and_clones
from verify_attacks import build_trail, find, kinds, raw_commit, rebuild_log, verify, write_commit

from git_agentckpt.audit.witness import load, witness_path
from git_agentckpt.git.repo import GitRepo

EVENTS = "refs/agent/events/t"
CKPTS = "refs/agent/checkpoints/t"


def test_shared_and_diverged_trails_pass(tmp_path: Path) -> None:
    """Union merges of logs and a diverged checkpoint chain are not tampering."""
    remote, a, b = remote_and_clones(tmp_path)
    build_trail(a)
    ckpt(a, "push")
    ckpt(b, "fetch")
    ckpt(a, "event", "t", "--type", "note", "--json", '{"from": "a"}')
    ckpt(b, "event", "t", "--type", "note", "--json", '{"from": "b"}')
    (a / "a.txt").write_text("a\n")
    (b / "b.txt").write_text("b\n")
    ckpt(a, "create", "-t", "t", "-m", "from a")
    ckpt(a, "push")
    ckpt(b, "create", "-t", "t", "-m", "from b")
    assert ckpt(b, "push", ok=False).exit_code == 5  # the chains diverged: kept apart
    ckpt(a, "fetch")
    assert git(b, "rev-list", "--merges", EVENTS)  # the logs were united by a merge commit
    for clone in (a, b):
        code, doc = verify(clone, "--against", "origin")
        assert code == 0, (clone.name, doc["problems"])
        assert kinds(doc) == set()
    code, doc = verify(b)
    assert {p["kind"] for p in doc["problems"]} <= {"committed-elsewhere", "diverged"}
    code, doc = verify(remote)  # the bare server holds a's chain and both logs
    assert code == 0, doc["problems"]
    assert doc["checked"]["checkpoints"] == 5


def test_tampering_in_a_bare_repository(tmp_path: Path) -> None:
    remote, a, _ = remote_and_clones(tmp_path, clone_b=False)
    build_trail(a)
    ckpt(a, "push")
    assert verify(remote)[0] == 0
    git(remote, "update-ref", CKPTS, git(remote, "rev-parse", CKPTS + "~1"))
    code, doc = verify(remote)
    assert code == 6 and "ref-moved-back" in kinds(doc)


def test_truncation_after_a_fetch_is_caught_by_the_mirror(tmp_path: Path) -> None:
    _, a, b = remote_and_clones(tmp_path)
    build_trail(a)
    ckpt(a, "push")
    ckpt(b, "fetch")
    assert verify(b)[0] == 0
    git(b, "update-ref", EVENTS, git(b, "rev-parse", EVENTS + "~1"))  # drop the last event
    code, doc = verify(b)
    assert code == 6
    rolled = next(p for p in doc["problems"] if p["kind"] == "rolled-back")
    assert rolled["where"] == EVENTS and "fetched from or pushed to origin" in rolled["detail"]


def test_whole_store_rollback_needs_a_copy_kept_elsewhere(tmp_path: Path) -> None:
    _, a, _ = remote_and_clones(tmp_path, clone_b=False)
    build_trail(a)
    ckpt(a, "push")
    backup = tmp_path / "backup.git"
    # the daemon's socket, if one runs, is no file to copy (`cp -r` refuses it too)
    shutil.copytree(a / ".git", backup, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
    (a / "later.txt").write_text("later work\n")
    ckpt(a, "create", "-t", "t", "-m", "three")
    ckpt(a, "event", "t", "--type", "tool.call", "--json", '{"n": 100}')
    ckpt(a, "push")
    recorded = load(witness_path(GitRepo.discover(str(a))))
    assert recorded is not None and recorded[EVENTS]["tip"] == git(a, "rev-parse", EVENTS)
    shutil.rmtree(a / ".git")
    shutil.copytree(backup, a / ".git", symlinks=True)  # the whole store, mirrors and all

    # inside the store everything is consistent: nothing can see it
    code, doc = verify(a, "--witness", str(tmp_path / "no-witness.json"))
    assert code == 0, doc["problems"]
    # the remote still has what was pushed
    code, doc = verify(a, "--against", "origin", "--witness", str(tmp_path / "none.json"))
    assert code == 6
    rolled = {p["where"] for p in doc["problems"] if p["kind"] == "rolled-back"}
    assert {EVENTS, CKPTS, "refs/notes/agent/state"} <= rolled
    # and so does the witness file push wrote (default place, outside the repository)
    code, doc = verify(a)
    assert code == 6
    details = [p["detail"] for p in doc["problems"] if p["kind"] == "rolled-back"]
    assert any("the witness file recorded event #" in d for d in details)
    assert any(d.startswith("the witness file had ") for d in details)


def _install_verifying_pre_receive(remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c '\n"
        "import sys\n"
        "from git_agentckpt.api import verify_pushed\n"
        "updates = [tuple(line.split()) for line in sys.stdin if line.strip()]\n"
        'report = verify_pushed(".", updates)\n'
        "for line in report.lines(): print(line, file=sys.stderr)\n"
        "sys.exit(0 if report.ok else 1)\n'\n"
    )
    hook.chmod(0o755)


def test_pre_receive_verifies_quarantined_objects(tmp_path: Path) -> None:
    remote, a, _ = remote_and_clones(tmp_path, clone_b=False)
    _install_verifying_pre_receive(remote)
    build_trail(a)
    pushed = ckpt_json(a, "push")  # objects arrive in quarantine: read there, accepted
    assert not any(p["flag"] == "!" for p in pushed["pushed"])
    assert git(remote, "rev-parse", CKPTS) == git(a, "rev-parse", CKPTS)
    # a checkpoint forged with plumbing on top of the tip: no prepare event
    tip = git(a, "rev-parse", CKPTS)
    head, message = raw_commit(a, tip)
    tree = head.split("\n", 1)[0].split()[1]
    forged = write_commit(a, tree, [tip], message.replace("Seq: 4", "Seq: 5"))
    git(a, "update-ref", CKPTS, forged)
    proc = subprocess.run(
        ["git", "push", "origin", f"{CKPTS}:{CKPTS}"], cwd=a, capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert f"checkpoint-unprepared at {forged}" in proc.stderr
    assert "missing-object" not in proc.stderr  # the quarantined commit was read
    assert git(remote, "rev-parse", CKPTS) == tip


def test_verify_pushed_without_quarantine_sees_objects_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same objects, kept in a separate object directory named by the environment
    (as git does during pre-receive), are found only through it."""
    from git_agentckpt.api import verify_pushed

    remote, a, _ = remote_and_clones(tmp_path, clone_b=False)
    build_trail(a)
    quarantine = tmp_path / "incoming"
    quarantine.mkdir()
    pack = subprocess.run(
        ["git", "pack-objects", "--revs", "--stdout"],
        cwd=a,
        input=f"{CKPTS}\n{EVENTS}\nrefs/notes/agent/state\n".encode(),
        capture_output=True,
        check=True,
    ).stdout
    env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(quarantine)}
    env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(remote / "objects")
    subprocess.run(["git", "unpack-objects", "-q"], cwd=remote, input=pack, env=env, check=True)
    zero = "0" * 40
    updates = [(zero, git(a, "rev-parse", r), r) for r in (CKPTS, EVENTS, "refs/notes/agent/state")]
    blind = verify_pushed(str(remote), updates)
    assert not blind.ok and "missing-object" in {p.kind for p in blind.problems}
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(quarantine))
    monkeypatch.setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", str(remote / "objects"))
    seen = verify_pushed(str(remote), updates)
    assert seen.ok, seen.lines()
    assert seen.tasks == ["t"] and seen.checked["checkpoints"] == 4
    assert json.loads(json.dumps(seen.to_json()))["ok"] is True


def test_against_a_remote_that_is_ahead_says_fetch(tmp_path: Path) -> None:
    remote, a, b = remote_and_clones(tmp_path)
    build_trail(a)
    ckpt(a, "push")
    ckpt(b, "fetch")
    ckpt(a, "event", "t", "--type", "tool.call", "--json", '{"n": 5}')
    ckpt(a, "push")
    code, doc = verify(b, "--against", "origin")
    assert code == 6
    behind = next(p for p in doc["problems"] if p["kind"] == "rolled-back")
    assert behind["where"] == EVENTS and "git ckpt fetch" in behind["detail"]
    ckpt(b, "fetch")
    assert verify(b, "--against", "origin")[0] == 0
    assert verify(b, "--against", str(remote))[0] == 0  # a URL works as well as a name


def test_truncation_after_a_push_is_caught_by_the_mirror(tmp_path: Path) -> None:
    remote, a, _ = remote_and_clones(tmp_path, clone_b=False)
    build_trail(a)
    ckpt(a, "push")
    mirrored = git(a, "rev-parse", "refs/ckpt-remotes/origin/agent/events/t")
    assert mirrored == git(a, "rev-parse", EVENTS) == git(remote, "rev-parse", EVENTS)
    git(a, "update-ref", EVENTS, EVENTS + "~1")
    code, doc = verify(a, "--witness", str(tmp_path / "none.json"))  # the mirror alone
    assert code == 6
    rolled = next(p for p in doc["problems"] if p["kind"] == "rolled-back")
    assert rolled["where"] == EVENTS


def test_a_deleted_task_is_named_by_each_copy_kept_elsewhere(tmp_path: Path) -> None:
    """Issue 26 item 3: a task's checkpoint and event refs deleted, its state notes taken
    out (`git notes remove`), then its fetch mirror deleted. Before: `verify`, `--witness`
    and `--against` all exit 0: only the local tasks were compared."""
    _, a, _ = remote_and_clones(tmp_path, clone_b=False)
    build_trail(a)
    build_trail(a, "u")
    ckpt(a, "push")
    none = str(tmp_path / "none.json")
    commits = git(a, "rev-list", "--first-parent", CKPTS).split()
    git(a, "notes", "--ref", "agent/state", "remove", "--ignore-missing", *commits)
    for ref in (CKPTS, EVENTS):
        git(a, "update-ref", "-d", ref)
    code, doc = verify(a, "--witness", none)  # the mirror of the last push knows it
    assert code == 6 and {"task-missing", "rolled-back"} == kinds(doc)
    missing = next(p for p in doc["problems"] if p["kind"] == "task-missing")
    assert missing["task"] == "t"
    assert "the copy last fetched from or pushed to origin still hold(s) it" in missing["detail"]
    for ref in (CKPTS, EVENTS):
        git(a, "update-ref", "-d", ref.replace("refs/", "refs/ckpt-remotes/origin/"))
    code, doc = verify(a, "--witness", none)  # nothing in the store names it any more
    assert code == 0, doc["problems"]
    code, doc = verify(a)  # the witness file push wrote
    missing = next(p for p in doc["problems"] if p["kind"] == "task-missing")
    assert code == 6 and missing["detail"].startswith(
        "the task's checkpoint and event refs are gone, but the witness file still hold(s) it"
    )
    assert "t" in doc["tasks"]
    code, doc = verify(a, "--against", "origin", "--witness", none)
    missing = next(p for p in doc["problems"] if p["kind"] == "task-missing")
    assert code == 6 and "but remote origin still hold(s) it" in missing["detail"]
    assert missing["detail"].endswith("(or never fetched it: `git ckpt fetch` brings it)")


def test_an_unsigned_log_rewritten_whole_needs_a_copy_kept_elsewhere(tmp_path: Path) -> None:
    """An unsigned log rewritten as a whole, one event edited, every Log-Digest and
    Parent-Head line computed again, is consistent with itself: inside the store only
    the mirror of the last push sees it; without the mirror, the witness file and the
    remote do (signed, `unsigned-commit` names it: tests/test_signing.py)."""
    _, a, _ = remote_and_clones(tmp_path, clone_b=False)
    build_trail(a)
    ckpt(a, "push")
    none = str(tmp_path / "none.json")

    def edit(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        i = find(items, lambda e: e["type"] == "tool.call" and e["data"] == {"n": 1})
        tree, message = items[i]
        assert '"n":1' in message
        return [*items[:i], (tree, message.replace('"n":1', '"n":7')), *items[i + 1 :]]

    rebuild_log(a, EVENTS, edit, reseal=True)
    code, doc = verify(a, "--witness", none)
    assert code == 6 and kinds(doc) == {"rolled-back"}
    assert "the copy last fetched from or pushed to origin had" in doc["problems"][0]["detail"]
    git(a, "update-ref", "-d", "refs/ckpt-remotes/origin/agent/events/t")
    assert verify(a, "--witness", none)[0] == 0  # consistent with itself: nothing inside sees it
    code, doc = verify(a)
    assert code == 6 and kinds(doc) == {"rolled-back"}
    code, doc = verify(a, "--against", "origin", "--witness", none)
    assert code == 6 and kinds(doc) == {"rolled-back"}
