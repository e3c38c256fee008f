"""create, list, show, log and diff leave the user's index, HEAD, branches, stash,
working tree and reflogs byte-identical."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from conftest import git
from helpers import ckpt, write


def fingerprint(repo: Path) -> dict[str, object]:
    gd = repo / ".git"
    index = gd / "index"
    out: dict[str, object] = {
        "index": index.read_bytes(),
        "index_mtime": os.stat(index).st_mtime_ns,
        "HEAD": (gd / "HEAD").read_text(),
        "refs": git(
            repo,
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/heads",
            "refs/stash",
            "refs/tags",
        ),
    }
    logs = gd / "logs"
    for path in sorted(logs.rglob("*")):
        rel = str(path.relative_to(logs))
        if path.is_file() and (rel == "HEAD" or rel.startswith(("refs/heads/", "refs/stash"))):
            out[f"log:{path.relative_to(logs)}"] = path.read_bytes()
    tree: dict[str, str] = {}
    for path in sorted(repo.rglob("*")):
        if ".git" in path.relative_to(repo).parts or not path.is_file():
            continue
        tree[str(path.relative_to(repo))] = hashlib.sha256(path.read_bytes()).hexdigest()
        tree[str(path.relative_to(repo)) + ":mtime"] = str(os.stat(path).st_mtime_ns)
    out["worktree"] = tree
    return out


def test_reading_and_creating_never_touch_user_state(repo: Path) -> None:
    # a realistic user state: staged change, unstaged change, untracked file, a stash
    write(repo / "README.md", "stashed\n")
    git(repo, "stash", "-q")
    write(repo / "src" / "app.py", "print('staged')\n")
    git(repo, "add", "src/app.py")
    write(repo / "src" / "app.py", "print('unstaged')\n")
    write(repo / "untracked.txt", "u\n")
    git(repo, "branch", "side")
    before = fingerprint(repo)
    ckpt(repo, "task", "start", "exp", "--goal", "g")
    ckpt(repo, "create", "-t", "exp", "-m", "one")
    write_after = fingerprint(repo)
    assert write_after == before
    ckpt(repo, "create", "-t", "exp", "--light")
    ckpt(repo, "create", "-t", "exp")
    for args in (
        ("list",),
        ("list", "exp"),
        ("show", "exp"),
        ("log", "exp"),
        ("diff", "exp~2", "exp"),
        ("list", "--json"),
        ("show", "exp", "--json"),
        ("log", "exp", "--json"),
        ("diff", "exp~1", "exp", "--json"),
    ):
        ckpt(repo, *args)
    assert fingerprint(repo) == before
    # and the staged content is still what the user staged
    assert git(repo, "diff", "--cached", "--name-only") == "src/app.py"
