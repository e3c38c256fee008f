"""`git ckpt verify`: a clean trail passes; each tampering of the issue is named.

Every attack is made with real git plumbing (hash-object, update-ref, notes,
writing object and ref files), as someone with write access to the
repository would, never through the tool.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import BIN_DIR, KILLED, ckpt, real_ckpt
from verify_attacks import (
    EMPTY_TREE,
    build_trail,
    chain,
    event_lines,
    find,
    kinds,
    loose_path,
    raw_commit,
    rebuild_log,
    rewrite_in_place,
    verify,
    write_commit,
)

from git_agentckpt.store.events import with_digest

EVENTS = "refs/agent/events/t"
CKPTS = "refs/agent/checkpoints/t"
STATE = "refs/notes/agent/state"


@pytest.fixture
def trail(repo: Path) -> Path:
    build_trail(repo)
    return repo


def test_a_clean_trail_passes(trail: Path) -> None:
    build_trail(trail, "u")
    code, doc = verify(trail)
    assert code == 0, doc["problems"]
    assert doc["ok"] is True and doc["problems"] == []
    assert doc["tasks"] == ["t", "u"]
    assert doc["checked"]["checkpoints"] == 8  # 4 per task: baseline, one, step end, two
    text = real_ckpt(trail, "verify", "t")  # the installed command, through git
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("verify ok: 1 task(s), 0 error(s)")


def test_an_edited_event_is_named_at_its_commit(trail: Path) -> None:
    def edit(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        i = find(items, lambda e: e["type"] == "tool.call" and e["data"] == {"n": 1})
        tree, message = items[i]
        items[i] = (tree, message.replace('"data":{"n":1}', '"data":{"n":7}'))
        return items

    rebuild_log(trail, EVENTS, edit)
    edited = [c for c in chain(trail, EVENTS) if '"n":7' in raw_commit(trail, c)[1]]
    code, doc = verify(trail)
    assert code == 6
    bad = [p for p in doc["problems"] if p["kind"] == "log-digest-mismatch"]
    assert [p["where"] for p in bad] == [edited[0][:12]]
    # rebuilt by someone else: each commit's author and committer changed too
    assert kinds(doc) == {"log-digest-mismatch", "commit-metadata-edited"}


def test_deleted_event_leaves_a_gap(trail: Path) -> None:
    def drop(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        i = find(items, lambda e: e["type"] == "tool.call" and e["data"] == {"n": 1})
        return items[:i] + items[i + 1 :]

    rebuild_log(trail, EVENTS, drop)
    code, doc = verify(trail)
    assert code == 6
    assert {"seq-gap", "log-digest-mismatch"} <= kinds(doc)
    gap = next(p for p in doc["problems"] if p["kind"] == "seq-gap")
    assert "missing" in gap["detail"]


def test_reordered_events_are_out_of_order(trail: Path) -> None:
    def swap(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        i = find(items, lambda e: e["type"] == "tool.call" and e["data"] == {"n": 0})
        items[i], items[i + 1] = items[i + 1], items[i]
        return items

    rebuild_log(trail, EVENTS, swap)
    code, doc = verify(trail)
    assert code == 6
    assert {"seq-out-of-order", "seq-gap", "log-digest-mismatch"} <= kinds(doc)


def test_truncated_log_loses_the_checkpoints_events(trail: Path) -> None:
    commits = chain(trail, EVENTS)
    prepare_two = next(
        i
        for i, c in enumerate(commits)
        if any(
            e["type"] == "checkpoint.prepare" and e["data"].get("number") == 4
            for e in event_lines(raw_commit(trail, c)[1])
        )
    )
    git(trail, "update-ref", EVENTS, commits[prepare_two - 1])  # cut from the prepare on
    code, doc = verify(trail)
    assert code == 6
    unprepared = [p for p in doc["problems"] if p["kind"] == "checkpoint-unprepared"]
    assert [p["where"] for p in unprepared] == [git(trail, "rev-parse", CKPTS)]


def test_forged_event_with_a_repeated_number(trail: Path) -> None:
    tip = git(trail, "rev-parse", EVENTS)
    last = event_lines(raw_commit(trail, tip)[1])[-1]
    forged = {**last, "id": "01JZZZZZZZZZZZZZZZZZZZZZZZ", "data": {"n": "forged"}}
    write = write_commit(trail, EMPTY_TREE, [tip], "forged\n\n" + json.dumps(forged) + "\n")
    git(trail, "update-ref", EVENTS, write)
    code, doc = verify(trail)
    assert code == 6
    assert {"seq-out-of-order", "log-digest-missing"} <= kinds(doc)


def test_forged_event_with_a_valid_digest_but_a_copied_id(trail: Path) -> None:
    """A forger who knows the digest rule still reuses an id: caught."""
    tip = git(trail, "rev-parse", EVENTS)
    tip_head, tip_message = raw_commit(trail, tip)
    events = [e for c in chain(trail, EVENTS) for e in event_lines(raw_commit(trail, c)[1])]
    copied = next(e for e in events if e["type"] == "tool.call")
    forged = {**copied, "seq": events[-1]["seq"] + 1}
    body = "forged\n\n" + json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n"
    commit = write_commit(trail, EMPTY_TREE, [tip], with_digest(body, tip_message, tip_head))
    git(trail, "update-ref", EVENTS, commit)
    code, doc = verify(trail)
    assert code == 6
    assert kinds(doc) == {"event-duplicate-id"}


def test_metadata_edit_of_an_event_commit(trail: Path) -> None:
    """An event commit rewritten with the same message but another author and date (and
    the commits after it rebuilt on top, messages unchanged): the next commit's
    Parent-Head line binds its parent's tree, author and committer lines."""
    commits = chain(trail, EVENTS)  # oldest first
    victim = commits[-2]
    parent = None
    for commit in commits[commits.index(victim) - 1 :]:
        head, message = raw_commit(trail, commit)
        tree = head.split("\n", 1)[0].split()[1]
        if parent is None:  # the commit before the victim: kept
            parent = commit
            continue
        if commit == victim:
            env = {"GIT_AUTHOR_NAME": "mallory", "GIT_AUTHOR_DATE": "2001-01-01T00:00:00Z"}
            env["GIT_COMMITTER_DATE"] = "2001-01-01T00:00:00Z"
            parent = subprocess.run(
                ["git", "commit-tree", tree, "-p", parent],
                cwd=trail, input=message, capture_output=True, text=True, check=True,
                env={**os.environ, **env},
            ).stdout.strip()  # fmt: skip
        else:  # rebuilt on top as filter-branch would, keeping each message
            parent = write_commit(trail, tree, [parent], message)
    assert parent is not None
    git(trail, "update-ref", EVENTS, parent)
    code, doc = verify(trail)
    assert code == 6
    edited = [p for p in doc["problems"] if p["kind"] == "commit-metadata-edited"]
    rewritten = git(trail, "rev-parse", EVENTS + "~1")  # the victim as rebuilt
    assert [p["where"] for p in edited] == [rewritten[:12]]
    assert "log-digest-mismatch" not in kinds(doc)  # no event changed


def test_checkpoint_ref_moved_back_is_tampering(trail: Path) -> None:
    tip = git(trail, "rev-parse", CKPTS)
    git(trail, "update-ref", CKPTS, tip + "~1")
    code, doc = verify(trail)
    assert code == 6
    moved = [p for p in doc["problems"] if p["kind"] == "ref-moved-back"]
    assert [p["where"] for p in moved] == [tip]
    assert "tampering" in moved[0]["detail"]


def test_direct_write_to_a_ref_file_bypassing_the_hook(trail: Path) -> None:
    ckpt(trail, "hooks", "install")
    tip = git(trail, "rev-parse", CKPTS)
    older = git(trail, "rev-parse", CKPTS + "~2")
    refused = real_ckpt(trail, "verify")  # still clean with the hook in place
    assert refused.returncode == 0
    # git's own update-ref goes through the hook and is refused...
    with pytest.raises(subprocess.CalledProcessError):
        git(trail, "update-ref", CKPTS, older)
    assert git(trail, "rev-parse", CKPTS) == tip
    # ...writing the ref file is not
    ref_file = trail / ".git" / CKPTS
    ref_file.write_text(older + "\n")
    code, doc = verify(trail)
    assert code == 6
    assert "ref-moved-back" in kinds(doc)


def test_rewritten_checkpoint_commit(trail: Path) -> None:
    tip = git(trail, "rev-parse", CKPTS)
    head, message = raw_commit(trail, tip)
    tree = head.split("\n", 1)[0].split()[1]
    parents = [line.split()[1] for line in head.splitlines() if line.startswith("parent ")]
    forged = write_commit(trail, tree, parents, message.replace("Trigger: manual", "Trigger: x"))
    git(trail, "update-ref", CKPTS, forged)
    code, doc = verify(trail)
    assert code == 6
    named = {p["kind"]: p["where"] for p in doc["problems"]}
    assert named["checkpoint-unprepared"] == forged
    assert named["checkpoint-unreachable"] == tip
    assert named["note-missing"] == forged  # the notes stayed on the original


def test_checkpoint_commit_rewritten_in_place(trail: Path) -> None:
    tip = git(trail, "rev-parse", CKPTS)
    rewrite_in_place(trail, tip, b"Trigger: manual", b"Trigger: hacks")
    code, doc = verify(trail)
    assert code == 6
    assert "object-corrupt" in kinds(doc)


def test_notes_add_force_on_a_checkpoint(trail: Path) -> None:
    tip = git(trail, "rev-parse", CKPTS)
    state = json.loads(git(trail, "notes", "--ref", STATE, "show", tip))
    for step in state["steps"]:
        step["status"] = "done"  # claim s2 done, which never happened
    git(trail, "notes", "--ref", STATE, "add", "-f", "-m", json.dumps(state), tip)
    code, doc = verify(trail)
    assert code == 6
    assert {"note-replaced", "claim-unbacked"} <= kinds(doc)
    claim = next(p for p in doc["problems"] if p["kind"] == "claim-unbacked")
    assert "step s2" in claim["detail"]


def test_note_copied_from_another_task(trail: Path) -> None:
    build_trail(trail, "u")
    theirs = git(trail, "rev-parse", "refs/agent/checkpoints/u")
    ours = git(trail, "rev-parse", CKPTS)
    git(trail, "notes", "--ref", STATE, "copy", "-f", theirs, ours)
    code, doc = verify(trail, "t")
    assert code == 6
    misplaced = next(p for p in doc["problems"] if p["kind"] == "note-misplaced")
    assert misplaced["where"] == ours and "'u'" in misplaced["detail"]
    assert "note-replaced" in kinds(doc)
    assert verify(trail, "u")[0] == 0  # the source task is fine


def test_missing_snapshot_object(trail: Path) -> None:
    tip = git(trail, "rev-parse", CKPTS + "~1")  # the step-end checkpoint added t-b.txt
    blob = git(trail, "rev-parse", f"{tip}:t-b.txt")
    loose_path(trail, blob).unlink()
    code, doc = verify(trail)
    assert code == 6
    missing = next(p for p in doc["problems"] if p["kind"] == "missing-object")
    assert "t-b.txt" in missing["detail"] and missing["where"] == tip


def test_missing_event_commit_breaks_the_log(trail: Path) -> None:
    middle = chain(trail, EVENTS)[3]
    loose_path(trail, middle).unlink()
    code, doc = verify(trail)
    assert code == 6
    missing = next(p for p in doc["problems"] if p["kind"] == "missing-object")
    assert missing["where"] == middle


def test_damage_in_one_task_does_not_stop_the_others(trail: Path) -> None:
    build_trail(trail, "u")
    garbage = git(trail, "hash-object", "-w", "--stdin", input="not a commit")
    git(trail, "update-ref", CKPTS, garbage)
    evil = {"v": 1, "id": "X\nerror: forged line\x1b[2J", "seq": 1, "ts": "", "task": "t\n"}
    evil["type"] = "tool.call"
    lines = ["{not json", '{"a":' * 5000, json.dumps(evil)]
    forged = write_commit(trail, EMPTY_TREE, [], "x\n\n" + "\n".join(lines) + "\n")
    git(trail, "update-ref", EVENTS, forged)
    code, doc = verify(trail)
    assert code == 6
    t_kinds = {p["kind"] for p in doc["problems"] if p["task"] == "t"}
    assert "missing-object" in t_kinds or "unreadable" in t_kinds or "ref-damaged" in t_kinds
    assert "event-malformed" in t_kinds
    assert not [p for p in doc["problems"] if p["task"] == "u"]
    assert "event-wrong-task" in t_kinds
    text = ckpt(trail, "verify", ok=False).stdout
    assert "Traceback" not in text
    assert not [line for line in text.splitlines() if line.startswith("error: forged")]
    assert "\x1b" not in text and "X\\x0aerror: forged line\\x1b[2J" in text


def test_an_old_log_without_digests_is_said_not_failed(trail: Path) -> None:
    def strip(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        def old(m: str) -> str:
            m = m.split("\n\nLog-Digest: ")[0] + "\n"
            return "".join(x for x in m.splitlines(True) if not x.startswith("Parent-Head: "))

        return [(tree, old(m)) for tree, m in items]

    rebuild_log(trail, EVENTS, strip)
    code, doc = verify(trail)
    assert code == 0, doc["problems"]
    assert kinds(doc, "info") == {"log-undigested"}


def test_unknown_task_and_text_output(trail: Path) -> None:
    assert ckpt(trail, "verify", "nope", ok=False).exit_code == 3
    git(trail, "update-ref", CKPTS, git(trail, "rev-parse", CKPTS + "~1"))
    out = ckpt(trail, "verify", ok=False)
    assert out.exit_code == 6
    lines = out.stdout.splitlines()
    assert lines[0].startswith("error: task t: ref-moved-back at ")
    assert lines[-1].startswith("verify FAILED: 1 task(s), 1 error(s)")


def test_every_problem_kind_is_documented() -> None:
    from git_agentckpt.audit.problems import KINDS

    man = (Path(__file__).resolve().parent.parent / "man" / "git-ckpt.1").read_text()
    for kind in KINDS:
        assert f".B {kind}\n" in man, kind


def test_deleted_refs(trail: Path) -> None:
    tip = git(trail, "rev-parse", CKPTS)
    git(trail, "update-ref", "-d", CKPTS)
    code, doc = verify(trail)
    assert code == 6
    gone = [p for p in doc["problems"] if p["kind"] == "checkpoint-unreachable"]
    assert len(gone) == 4 and tip in {p["where"] for p in gone}  # all four checkpoints
    assert all("deleted" in p["detail"] for p in gone)
    git(trail, "update-ref", CKPTS, tip)
    git(trail, "update-ref", "-d", EVENTS)
    code, doc = verify(trail)
    assert code == 6 and kinds(doc) == {"checkpoint-unprepared", "claim-unbacked"}


def test_a_task_deleted_as_a_whole_is_named_by_its_notes(trail: Path) -> None:
    """Issue 26 item 3: `update-ref -d` of a task's checkpoint and event refs. Before: the
    task was simply not there, `verify` ok. The state notes of its checkpoints name it."""
    build_trail(trail, "u")
    for ref in (CKPTS, EVENTS):
        git(trail, "update-ref", "-d", ref)
    code, doc = verify(trail)
    assert code == 6 and kinds(doc) == {"task-missing"}
    assert doc["tasks"] == ["u", "t"]
    (missing,) = doc["problems"]
    assert (missing["task"], missing["where"]) == ("t", CKPTS)
    assert missing["detail"] == (
        "the task's checkpoint and event refs are gone, but 4 state note(s) still hold(s) it: "
        "the task was deleted, or this store rolled back"
    )
    assert verify(trail, "u")[0] == 0  # the other task is fine


def test_forged_union_merge_is_caught(trail: Path) -> None:
    """A fake merge commit (another clone's events, supposedly) carrying an invented event,
    with a valid Log-Digest: its second parent's log does not hold that event."""
    tip = git(trail, "rev-parse", EVENTS)
    tip_head, tip_message = raw_commit(trail, tip)
    forged = {"v": 1, "id": "01JZZZZZZZZZZZZZZZZZZZZZZY", "seq": 3, "ts": "2026-01-01T00:00:00Z"}
    forged.update(task="t", type="step.end", actor={}, links={"step": "s2"})
    body = "merge 1 event(s) from elsewhere\n\n" + json.dumps(forged, sort_keys=True) + "\n"
    other = git(trail, "rev-parse", EVENTS + "~3")
    merge = write_commit(trail, EMPTY_TREE, [tip, other], with_digest(body, tip_message, tip_head))
    git(trail, "update-ref", EVENTS, merge)
    code, doc = verify(trail)
    assert code == 6
    assert kinds(doc) == {"merge-unbacked"}
    assert next(p for p in doc["problems"] if p["kind"] == "merge-unbacked")["where"].startswith(
        merge[:12]
    )


def test_a_resumed_task_passes_and_its_reports_are_checked(trail: Path) -> None:
    resumed = ckpt(trail, "resume", "t", ok=False)
    assert resumed.exit_code == 0, resumed.output
    code, doc = verify(trail)
    assert code == 0, doc["problems"]
    assert doc["checked"]["report commits"] >= 1 and doc["checked"]["checkpoints"] == 5
    report = git(trail, "rev-parse", "refs/agent/reports/t")
    rewrite_in_place(trail, report, b"committer ", b"committer X")
    code, doc = verify(trail)
    assert code == 6
    assert {p["where"] for p in doc["problems"] if p["kind"] == "object-corrupt"} == {report}


@pytest.mark.parametrize("crash", ["checkpoint.objects", "checkpoint.ref"])
def test_a_killed_checkpoint_is_no_tampering(trail: Path, crash: str) -> None:
    """Killed before and after its transaction: never an error, not even a warning (the
    checkpoint's records are all there, or none of them)."""
    env = {**os.environ, "GIT_CKPT_CRASH_AT": crash}
    killed = subprocess.run(
        [os.path.join(BIN_DIR, "git-ckpt"), "create", "-t", "t", "--light", "-m", "killed"],
        cwd=trail,
        env=env,
        capture_output=True,
    )
    assert killed.returncode in KILLED
    code, doc = verify(trail)
    assert code == 0, doc["problems"]
    assert kinds(doc, "warning") == set()
    tip_subject = git(trail, "log", "-1", "--format=%s", "refs/agent/checkpoints/t")
    assert tip_subject.endswith(": killed") == (crash == "checkpoint.ref")
    assert ckpt(trail, "resume", "t", ok=False).exit_code == 0
    code, doc = verify(trail)
    assert code == 0 and kinds(doc, "warning") == set(), doc["problems"]


def test_a_payload_stored_apart_must_be_present(trail: Path) -> None:
    big = "a long line of tool output\n" * 4000  # above 64 KiB: a blob of the event commit
    ckpt(trail, "event", "t", "--type", "tool.call", "--json", json.dumps({"output": big}))
    assert verify(trail)[0] == 0
    tip = git(trail, "rev-parse", EVENTS)
    blob = git(trail, "ls-tree", tip).split()[2]
    loose_path(trail, blob).unlink()
    code, doc = verify(trail)
    assert code == 6
    lost = next(p for p in doc["problems"] if p["kind"] == "missing-object")
    assert lost["where"] == tip and blob[:12] in lost["detail"]


def test_failed_and_retried_steps_pass(trail: Path) -> None:
    ckpt(trail, "step", "start", "t", "s2")
    ckpt(trail, "step", "fail", "t", "s2", "--output", '{"why": "flaky"}')
    ckpt(trail, "step", "start", "t", "s2")
    (trail / "t-c.txt").write_text("third\n")
    ckpt(trail, "step", "done", "t", "s2")
    code, doc = verify(trail)
    assert code == 0, doc["problems"]
    assert doc["problems"] == []


def test_a_flood_of_bad_lines_is_counted_not_listed(trail: Path) -> None:
    tip = git(trail, "rev-parse", EVENTS)
    flood = "\n".join(json.dumps({"v": 2, "n": i}) for i in range(5000))
    git(trail, "update-ref", EVENTS, write_commit(trail, EMPTY_TREE, [tip], f"x\n\n{flood}\n"))
    code, doc = verify(trail)
    assert code == 6
    bad = [p for p in doc["problems"] if p["kind"] == "event-malformed"]
    assert len(bad) == 21 and bad[-1]["detail"] == "4980 more problem(s) of this kind"
