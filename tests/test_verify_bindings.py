"""Notes and recovery reports are bound by the events written with them (issue 26, items 4
and 5): a note or a report changed later by plain git is named by `verify`, and resume
never acts on an assertions note its checkpoint's prepare event did not bind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt, ckpt_json, write
from verify_attacks import kinds, verify

CKPTS = "refs/agent/checkpoints/t"
REPORTS = "refs/agent/reports/t"
WANTS_V1 = [{"id": "data-v1", "check": {"kind": "file_contains", "file": "data.txt", "text": "v1"}}]


def add_assertions(repo: Path, commit: str, checks: list[dict[str, Any]]) -> None:
    note = json.dumps({"v": 1, "assertions": checks})
    git(repo, "notes", "--ref", "agent/assertions", "add", "-f", "-m", note, commit)


def test_an_assertions_note_no_prepare_bound_is_named_and_never_acted_on(repo: Path) -> None:
    """Item 4: notes added with `git notes add -f` on two checkpoints whose prepare events
    named no assertions note. Before: `verify` ok, and resume failed the tip's, rolled the
    work tree back to the older checkpoint (whose forged note passed), and carried the
    forged assertions into its resume checkpoint."""
    ckpt(repo, "task", "start", "t", "--goal", "bound notes", "--step", "s1:work")
    write(repo / "data.txt", "v1\n")
    ckpt(repo, "create", "-t", "t", "-m", "one")
    write(repo / "data.txt", "v2\n")
    ckpt(repo, "create", "-t", "t", "-m", "two")
    tip, older = git(repo, "rev-parse", CKPTS), git(repo, "rev-parse", CKPTS + "~1")
    add_assertions(repo, older, WANTS_V1)
    add_assertions(repo, tip, WANTS_V1)  # fails on v2: a rollback to `older` would follow
    code, doc = verify(repo)
    assert code == 6 and kinds(doc) == {"note-added"}
    added = [p for p in doc["problems"] if p["kind"] == "note-added"]
    assert {p["where"] for p in added} == {tip, older}
    assert "its prepare event bound none" in added[0]["detail"]

    out = ckpt(repo, "resume", "t", "--json")
    resumed = json.loads(out.stdout)
    assert resumed["outcome"] == "ready"
    assert (repo / "data.txt").read_text() == "v2\n"  # nothing rolled back
    assert resumed["assertions"]["rollback"] is None and resumed["assertions"]["results"] == []
    (aside,) = resumed["assertions"]["notes_set_aside"]
    assert "was added after the fact (its prepare event bound none): not acted on" in aside
    assert aside in resumed["brief_markdown"]
    stored = git(repo, "show", f"{REPORTS}:{resumed['id']}/report.json")
    assert json.loads(stored)["assertions"]["notes_set_aside"] == [aside]
    made = git(repo, "rev-parse", CKPTS)  # the resume checkpoint carries no forged assertion
    assert made not in git(repo, "notes", "--ref", "agent/assertions", "list")
    code, doc = verify(repo)
    assert kinds(doc) == {"note-added"} and len(doc["problems"]) == 2


def fill(form: str, goal: str, next_step: str) -> str:
    return (
        form.replace("<the goal, in your own words>", goal)
        .replace("<ids of the done steps, or none>", "none")
        .replace("<id of the next step, or none>", next_step)
    )


def resumed(repo: Path) -> dict[str, Any]:
    """Task `t`, a checkpoint, and a resume (ready, not confirmed yet): its `--json`."""
    ckpt(repo, "task", "start", "t", "--goal", "write the report", "--step", "s1:draft")
    write(repo / "draft.md", "one\n")
    ckpt(repo, "create", "-t", "t", "-m", "one")
    out: dict[str, Any] = ckpt_json(repo, "resume", "t")
    assert out["outcome"] == "ready"
    return out


def confirm(repo: Path, out: dict[str, Any]) -> None:
    form = fill(out["brief"]["restatement_form"], "write the report", "s1")
    ckpt(repo, "confirm", "t", "--restatement", "-", input=form)


def edit_report(repo: Path, report: str, edit: Callable[[dict[str, Any]], None]) -> str:
    """A fast-forward commit on the reports ref whose report.json `edit` changed, written
    with plumbing (ls-tree, hash-object, mktree, commit-tree, update-ref); its id."""
    tip = git(repo, "rev-parse", REPORTS)
    doc = json.loads(git(repo, "show", f"{tip}:{report}/report.json"))
    edit(doc)
    blob = git(repo, "hash-object", "-w", "--stdin", input=json.dumps(doc) + "\n")

    def swap(tree: str, name: str, oid: str) -> str:
        lines = git(repo, "ls-tree", tree).splitlines()
        kept = [line for line in lines if line.split("\t", 1)[1] != name]
        mode = "040000 tree" if name == report else "100644 blob"
        return git(repo, "mktree", input="\n".join([*kept, f"{mode} {oid}\t{name}"]) + "\n")

    sub = swap(f"{tip}:{report}", "report.json", blob)
    top = swap(f"{tip}^{{tree}}", report, sub)
    commit = git(repo, "commit-tree", top, "-p", tip, "-m", f"report {report}: confirmed")
    git(repo, "update-ref", REPORTS, commit, tip)
    return commit


def unconfirm(doc: dict[str, Any]) -> None:
    doc["confirmation"]["passed"] = False
    doc["brief"]["goal"] = "another goal"


def test_a_report_edited_by_a_fast_forward_commit_is_named(repo: Path) -> None:
    """Item 5: confirmed -> false and another goal, in a commit on top of the reports ref.
    A new report and a confirm's update of its own report pass."""
    out = resumed(repo)
    confirm(repo, out)
    again = ckpt_json(repo, "resume", "t")  # a second report, on top of the confirmed one
    assert verify(repo)[0] == 0
    edit_report(repo, out["id"], unconfirm)
    code, doc = verify(repo)
    assert code == 6 and kinds(doc) == {"report-replaced"}
    (edited,) = doc["problems"]
    assert edited["where"] == f"{REPORTS}:{out['id']}"
    assert edited["detail"].startswith("report.json: not what the log bound")
    assert again["id"] not in json.dumps(doc["problems"])  # the other report is fine


def test_a_report_edited_before_its_confirm_is_named_at_the_confirm(repo: Path) -> None:
    """The confirm rewrites the report it reads; it names what it read, so an edit made
    between the resume and the confirm is not laundered into a bound report."""
    out = resumed(repo)
    edit_report(repo, out["id"], lambda doc: doc["brief"].update(goal="another goal"))
    confirm(repo, out)
    code, doc = verify(repo)
    assert code == 6 and kinds(doc) == {"report-replaced"}
    (edited,) = doc["problems"]
    confirmed = json.loads(ckpt(repo, "log", "t", "--json").stdout.splitlines()[-2])
    assert confirmed["type"] == "recovery.confirmed"
    assert edited["where"].endswith(confirmed["id"]) and "edited before" in edited["detail"]


def test_a_report_added_or_removed_by_hand_is_named(repo: Path) -> None:
    out = resumed(repo)
    tip = git(repo, "rev-parse", REPORTS)
    sub = git(repo, "rev-parse", f"{tip}:{out['id']}")
    lines = git(repo, "ls-tree", tip).splitlines()
    forged = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
    top = git(repo, "mktree", input="\n".join([f"040000 tree {sub}\t{forged}"]) + "\n")
    commit = git(repo, "commit-tree", top, "-p", tip, "-m", "a report by hand")
    git(repo, "update-ref", REPORTS, commit, tip)
    code, doc = verify(repo)
    assert code == 6 and len(lines) == 1
    found = {(p["kind"], p["where"].rsplit(":", 1)[1]) for p in doc["problems"]}
    assert found == {("report-unbound", forged), ("report-replaced", out["id"])}
    gone = next(p for p in doc["problems"] if p["kind"] == "report-replaced")
    assert "the report is gone" in gone["detail"]
