"""The watcher is a hint, never the truth (issue 24): through the real daemon, random
sequences of user edits, the tool's own writes (restores, resumes that restore, rollbacks
of the work tree), changes to the user's index (`git add`, `git rm --cached`),
`.gitignore` edits and nested repositories give, at every checkpoint, exactly the tree a
full scan gives (git's own `add -A` on a copy of the user's index).

The daemon's child never trusts the picture of the work tree its fork gave it: it asks
the daemon through the cookie barrier (`daemon/barrier.py`), so its own writes are in
the answer. `test_watcher.py` runs the same kind of sequences with the watcher in the
test process."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_private_index import checkpoint_tree, listing, plumbing_tree
from test_watcher import FILES, Op, apply, ops

pytestmark = pytest.mark.mode("daemon", reason="the daemon's watcher against a full scan")

ours = st.one_of(
    st.tuples(st.just("restore"), st.integers(0, 5)),
    st.tuples(st.just("resume-restore"), st.sampled_from(FILES)),
    st.tuples(st.just("git-add"), st.sampled_from(FILES)),
    st.tuples(st.just("git-add-all")),
    st.tuples(st.just("rm-cached"), st.sampled_from(FILES)),
    st.tuples(st.just("nested"), st.sampled_from(("n1", "d/n2"))),
)
actions = st.one_of(ops, ours, ops)


def served_calls(root: Path) -> int:
    from git_agentckpt.cli.commands_server import daemon_status

    status = daemon_status(str(root / ".git"))
    assert status is not None, "the daemon is not running"
    return int(status["served"])


def checkpoint_equals_full_scan(root: Path, context: object) -> str:
    made = ckpt_json(root, "create", "-t", "t")
    assert listing(root, checkpoint_tree(root)) == listing(root, plumbing_tree(root)), context
    return str(made["commit"])


def act(root: Path, outside: Path, made: list[str], action: Op) -> None:
    kind, *args = action
    if kind == "restore":
        target = made[int(args[0]) % len(made)]
        out = ckpt(root, "restore", target, ok=False)
        if out.exit_code == 2 and "is a symbolic link" in out.stderr:
            return  # by design: never written through a link the user made (nothing was)
        assert out.exit_code == 0, out.output
    elif kind == "resume-restore":
        path = root / args[0]
        if path.is_file() and not path.is_symlink() and git(root, "ls-files", args[0]):
            write(path, "drifted by hand\n")
        out = ckpt(root, "resume", "t", "--restore", "--json", ok=False)
        if out.exit_code == 2 and "is a symbolic link" in out.stderr:
            ckpt(root, "confirm", "t", "--by-human", input="y\n", ok=False)
            return  # as for `restore`
        assert out.exit_code == 0, out.output
        doc = json.loads(out.stdout)
        assert doc["outcome"] == "ready", doc
        ckpt(root, "confirm", "t", "--by-human", input="y\n")
    elif kind == "git-add":  # an ignored or vanished path: git refuses, as for a user
        subprocess.run(["git", "add", "-A", "--", args[0]], cwd=root, capture_output=True)
    elif kind == "git-add-all":
        git(root, "add", "-A")
    elif kind == "rm-cached":
        git(root, "rm", "-q", "-r", "--cached", "--ignore-unmatch", "--", args[0])
    elif kind == "nested":
        nested = root / args[0]
        if nested.is_symlink() or nested.is_file():
            nested.unlink()
        nested.mkdir(parents=True, exist_ok=True)
        if not (nested / ".git").exists():
            git(nested, "init", "-q")
        write(nested / "inner.txt", "inner\n")
        git(nested, "add", "-A")
        git(nested, "commit", "-q", "--allow-empty", "-m", "inner")
    else:
        apply(root, outside, action)


def run_sequence(batches: list[list[Op]]) -> None:
    with tempfile.TemporaryDirectory(prefix="truth-") as tmp:
        root, outside = Path(tmp) / "repo", Path(tmp) / "outside"
        root.mkdir()
        outside.mkdir()
        git(root, "init", "-q")
        write(root / ".gitignore", "*.log\n")
        for path in FILES[::2]:
            write(root / path, path + "\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
        ckpt(root, "task", "start", "t", "--goal", "g")
        made = [checkpoint_equals_full_scan(root, "first")]
        before = served_calls(root)
        for i, batch in enumerate(batches):
            for action in batch:
                act(root, outside, made, action)
            made.append(checkpoint_equals_full_scan(root, (i, batches[: i + 1])))
        assert served_calls(root) > before  # through the daemon, not in this process


def test_property_the_daemon_gives_what_a_full_scan_gives(
    long_run: bool, person_at_terminal: None
) -> None:
    @settings(
        max_examples=150 if long_run else 12,
        deadline=None,
        derandomize=not long_run,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(st.lists(actions, min_size=1, max_size=4), min_size=1, max_size=5))
    def scenario(batches: list[list[Op]]) -> None:
        run_sequence(batches)

    scenario()


@pytest.mark.parametrize(
    "batches",
    [
        [[("resume-restore", "a.py")], [("write", "a.py", "1")], [("restore", 0)]],
        [[("write", "d/c.py", "22")], [("restore", 0), ("write", "b.txt", "1")]],
        [[("rm-cached", "a.py"), ("ignore", "*.log\n")], [("git-add-all",), ("restore", 0)]],
        [[("nested", "n1")], [("resume-restore", "d/f/g.py"), ("nested", "d/n2")]],
    ],
)
def test_our_own_writes_are_in_the_next_snapshot(
    batches: list[list[Op]], person_at_terminal: None
) -> None:
    run_sequence(batches)
