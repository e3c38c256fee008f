"""Event payloads above 64 KiB are stored apart (design section 1: "large payloads as
blobs referenced by id"): a blob in the event commit's tree, a reference in the event;
`log` shows the size, `log --full` loads it, redaction runs first, fetch carries it, and
logs written before (big payloads inline) still read."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git
from helpers import ckpt, remote_and_clones

import git_agentckpt
from git_agentckpt.model import Event, NewEvent, dumps, new_ulid
from git_agentckpt.store.refs import TaskName

SECRET = "sk-" + "proj-" + "Zx81_Yw72-" * 8
BIG = "line of tool output\n" * 5000  # ~100 KB


def start(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")


def log_json(repo: Path, *args: str) -> list[dict[str, object]]:
    out = ckpt(repo, "log", "t", "--json", *args).stdout
    return [json.loads(x) for x in out.splitlines()]


def test_a_big_output_is_a_blob_of_the_event_commit(repo: Path) -> None:
    start(repo)
    payload = {"input": "pytest -q", "output": BIG + SECRET, "exit": 0}
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps(payload))
    tip = git(repo, "rev-parse", "refs/agent/events/t")
    message = git(repo, "cat-file", "commit", tip)
    assert len(message) < 2000 and "line of tool output" not in message
    (entry,) = git(repo, "ls-tree", tip).splitlines()
    mode, kind, rest = entry.split(" ", 2)
    blob, name = rest.split("\t")
    assert (mode, kind, name) == ("100644", "blob", blob)
    stored = git(repo, "cat-file", "blob", blob)
    assert SECRET not in stored and "[REDACTED:" in stored  # redacted before it was stored
    last = log_json(repo)[-1]
    assert last["output"] == {"$payload": {"blob": blob, "bytes": len(stored.encode())}}
    assert last["input"] == "pytest -q" and last["data"] == {"exit": 0}  # small: inline
    text = ckpt(repo, "log", "t", "-n", "1").stdout
    size = len(stored.encode())
    assert f"[output: {size / 1024:.0f} KiB stored apart]" in text and size > 64 * 1024
    full = log_json(repo, "--full")[-1]
    assert isinstance(full["output"], str) and full["output"].startswith(BIG)
    assert "[REDACTED:" in full["output"] and SECRET not in full["output"]


def test_state_and_tool_events_stay_inline(repo: Path) -> None:
    start(repo)
    ck = git_agentckpt.open(str(repo))
    ck.create("t", message="x", state={"summary": {"text": BIG, "authoritative": False}})
    state = ck.state("t")
    assert state["summary"]["text"] == BIG  # a checkpoint's state: the note, whole


def test_an_old_log_with_a_big_payload_inline_still_reads(repo: Path) -> None:
    start(repo)
    tip = git(repo, "rev-parse", "refs/agent/events/t")
    ev = Event(new_ulid(), 99, "2026-01-01T00:00:00.000Z", "t", "tool.call", output=BIG)
    body = "tool.call\n\n" + dumps(ev.to_json()) + "\n"
    empty = git(repo, "hash-object", "-t", "tree", "-w", "--stdin", input="")
    old = git(repo, "commit-tree", empty, "-p", tip, input=body)
    git(repo, "update-ref", "refs/agent/events/t", old, tip)
    assert log_json(repo)[-1]["output"] == BIG
    assert log_json(repo, "--full")[-1]["output"] == BIG
    assert "stored apart" not in ckpt(repo, "log", "t").stdout


def test_a_reference_to_a_blob_outside_the_commit_is_not_followed(repo: Path) -> None:
    """A forged reference (an id not in the event commit's tree) is shown as stored."""
    start(repo)
    secret_blob = git(repo, "hash-object", "-w", "--stdin", input='"not for the log"')
    forged = {"$payload": {"blob": secret_blob, "bytes": 17}}
    ck = git_agentckpt.open(str(repo))
    ck.log.append(TaskName("t"), [ck_event("tool.call", forged)])
    result = ckpt(repo, "log", "t", "--json", "--full")
    assert json.loads(result.stdout.splitlines()[-1])["output"] == forged
    assert "not in its event commit" in result.stderr


def ck_event(type_: str, output: object) -> NewEvent:
    return NewEvent(type_, output=output)


def test_fetch_carries_the_payload(tmp_path: Path) -> None:
    _, a, b = remote_and_clones(tmp_path)
    start(a)
    ckpt(a, "event", "t", "--type", "tool.call", "--json", json.dumps({"output": BIG}))
    ckpt(a, "push")
    ckpt(b, "fetch")
    assert log_json(b, "--full")[-1]["output"] == BIG
    ckpt(b, "event", "t", "--type", "note", "--json", '{"n": 1}')
    ckpt(a, "event", "t", "--type", "tool.call", "--json", json.dumps({"output": BIG + "2"}))
    ckpt(a, "push")
    ckpt(b, "fetch")  # a union merge copies a's event: its payload comes along
    outputs = [e.get("output") for e in log_json(b, "--full")]
    assert BIG + "2" in outputs and BIG in outputs
