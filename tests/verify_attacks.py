"""Tampering with a trail as an attacker would: real git plumbing, no tool code.

Shared by tests/test_verify.py and tests/test_verify_rollback.py.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt

from git_agentckpt.store.events import split_digest, with_digest

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def build_trail(repo: Path, task: str = "t", tool_calls: int = 3) -> None:
    """A task with a baseline checkpoint, a manual one, a done step and work events."""
    git(repo, "config", "ckpt.packObjects", "false")  # loose objects, for the attacks
    ckpt(repo, "task", "start", task, "--goal", f"audit {task}", "--step", "s1", "--step", "s2")
    (repo / f"{task}-a.txt").write_text("first\n")
    ckpt(repo, "create", "-t", task, "-m", "one")
    ckpt(repo, "step", "start", task, "s1")
    (repo / f"{task}-b.txt").write_text("second\n")
    ckpt(repo, "step", "done", task, "s1")
    for n in range(tool_calls):
        ckpt(repo, "event", task, "--type", "tool.call", "--json", json.dumps({"n": n}))
    ckpt(repo, "create", "-t", task, "-m", "two")
    ckpt(repo, "event", task, "--type", "tool.call", "--json", json.dumps({"n": 99}))


def verify(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    from git_agentckpt.audit.problems import KINDS

    result = ckpt(repo, "verify", "--json", *args, ok=False)
    doc = json.loads(result.stdout)
    assert {p["kind"] for p in doc["problems"]} <= set(KINDS)
    return result.exit_code, doc


def kinds(doc: dict[str, Any], severity: str = "error") -> set[str]:
    return {p["kind"] for p in doc["problems"] if p["severity"] == severity}


def raw_commit(repo: Path, commit: str) -> tuple[str, str]:
    """(headers, message) of a commit object, exactly as stored."""
    raw = git_raw(repo, "cat-file", "commit", commit)
    head, _, message = raw.partition("\n\n")
    return head, message


def git_raw(cwd: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def chain(repo: Path, ref: str) -> list[str]:
    """The first-parent chain of `ref`, oldest first."""
    return git(repo, "rev-list", "--first-parent", "--reverse", ref).split()


def write_commit(repo: Path, tree: str, parents: list[str], message: str) -> str:
    """A commit object written with `git hash-object` (the message byte for byte)."""
    head = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
    who = "Mallory <m@example.com> 1767225600 +0000"
    body = f"{head}author {who}\ncommitter {who}\n\n{message}"
    return git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=body)


def rebuild_log(
    repo: Path,
    ref: str,
    edit: Callable[[list[tuple[str, str]]], list[tuple[str, str]]],
    *,
    reseal: bool = False,
) -> str:
    """Rewrite the log's whole chain from (tree, message) pairs that `edit` changed, then
    move the ref with `git update-ref` (a rewrite like filter-branch would make). With
    `reseal`, each message's `Parent-Head` line and `Log-Digest` are computed again, as a
    forger who knows the digest rule would (the commits are unsigned)."""
    items = []
    for commit in chain(repo, ref):
        head, message = raw_commit(repo, commit)
        tree = head.split("\n", 1)[0].split()[1]
        items.append((tree, message))
    parent: list[str] = []
    before: tuple[str | None, str] = (None, "")  # the previous message and header
    for tree, message in edit(items):
        if reseal:
            content = re.sub(r"Parent-Head: \S+\n\Z", "", split_digest(message)[0])
            message = with_digest(content, *before)
        parent = [write_commit(repo, tree, parent, message)]
        before = (message, raw_commit(repo, parent[0])[0])
    git(repo, "update-ref", ref, parent[0])
    return parent[0]


def event_lines(message: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in message.split("\n") if x.startswith("{")]


def find(items: list[tuple[str, str]], pred: Callable[[dict[str, Any]], bool]) -> int:
    for i, (_, message) in enumerate(items):
        if any(pred(e) for e in event_lines(message)):
            return i
    raise AssertionError("no such event")


def loose_path(repo: Path, oid: str) -> Path:
    return repo / ".git" / "objects" / oid[:2] / oid[2:]


def rewrite_in_place(repo: Path, oid: str, old: bytes, new: bytes) -> None:
    """Edit a loose object's content under its own name (git serves it until fsck)."""
    path = loose_path(repo, oid)
    data = zlib.decompress(path.read_bytes())
    assert old in data
    kind, _, body = data.partition(b"\0")
    body = body.replace(old, new)
    path.chmod(0o644)
    path.write_bytes(zlib.compress(kind.split()[0] + b" %d\0" % len(body) + body))
