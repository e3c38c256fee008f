"""No work twice: resume, restore and check snapshot the working tree at most once.

Snapshots are counted as git itself reports them: every `git add` process that git
runs writes a `cmd_name` record to the GIT_TRACE2_EVENT file. Each tree a command
records is compared with the tree git's own `add -A` + `write-tree` gives on a copy
of the user's index (an independent full snapshot).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

pytestmark = pytest.mark.mode(
    "inline",
    reason="counts `git add -A` scans: through the daemon a snapshot runs `update-index` on "
    "the changed paths instead (test_daemon_truth.py checks its trees)",
)


class GitAdds:
    """Counts the `git add` processes run since the last `reset()` (trace2 events)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def reset(self) -> None:
        self.path.write_text("")

    def count(self) -> int:
        if not self.path.exists():
            return 0
        n = 0
        for line in self.path.read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "cmd_name" and record.get("name") == "add":
                n += 1
        return n


@pytest.fixture
def adds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitAdds:
    path = tmp_path / "trace2.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(path))
    return GitAdds(path)


def full_snapshot(repo: Path) -> str:
    """git's own snapshot of the working tree: `add -A` on a copy of the user's index."""
    index = repo / ".git" / "test-full-index"
    shutil.copy2(repo / ".git" / "index", index)
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    env.pop("GIT_TRACE2_EVENT", None)
    import subprocess

    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    out = subprocess.run(
        ["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True, text=True
    )
    index.unlink()
    return out.stdout.strip()


def resume(repo: Path, *args: str) -> dict[str, Any]:
    result = ckpt(repo, "resume", "t", *args, "--json", ok=False)
    out: dict[str, Any] = json.loads(result.stdout)
    assert result.exit_code == 0, out
    return out


def started(repo: Path) -> dict[str, Any]:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    write(repo / "results.csv", "a,1\n")
    made: dict[str, Any] = ckpt_json(repo, "create", "-t", "t", "-m", "good")
    return made


# -- resume ------------------------------------------------------------------------------


def test_resume_on_a_clean_tree_takes_no_snapshot(repo: Path, adds: GitAdds) -> None:
    made = started(repo)
    adds.reset()
    out = resume(repo)
    assert adds.count() == 0  # verification proved the tree: the resume checkpoint reuses it
    assert out["verify"]["clean"] is True
    assert out["resume_checkpoint"]["tree"] == made["tree"] == full_snapshot(repo)


def test_resume_with_restore_snapshots_once(repo: Path, adds: GitAdds) -> None:
    made = started(repo)
    write(repo / "src" / "app.py", "print('drift')\n")
    write(repo / "scratch.txt", "new\n")
    drifted = full_snapshot(repo)
    adds.reset()
    out = resume(repo, "--restore")
    assert adds.count() == 1  # the restore's own snapshot; its safety checkpoint reuses it
    safety = out["verify"]["safety_checkpoint"]
    assert safety is not None and safety["tree"] == drifted
    assert out["resume_checkpoint"]["tree"] == made["tree"] == full_snapshot(repo)
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"


def test_resume_accepting_drift_records_what_is_on_disk(repo: Path, adds: GitAdds) -> None:
    started(repo)
    write(repo / "src" / "app.py", "print('kept')\n")
    (repo / "results.csv").unlink()
    adds.reset()
    out = resume(repo, "--accept-drift")
    assert adds.count() == 1  # one snapshot of the accepted tree, recorded as it is
    assert out["resume_checkpoint"]["tree"] == full_snapshot(repo)


def test_resume_snapshots_again_after_a_trusted_command_ran(repo: Path, adds: GitAdds) -> None:
    """A trusted constraint command may write files: the resume checkpoint then records
    the disk as it is after it (a second snapshot), not the tree verified before."""
    import git_agentckpt
    from git_agentckpt.contracts.engine import repo_identity
    from git_agentckpt.contracts.trust import TrustStore

    argv = ["sh", "-c", "echo out > made-by-check.txt"]
    write(
        repo / ".agent" / "contracts" / "constraints.json",
        json.dumps(
            {
                "constraints": [
                    {
                        "id": "c",
                        "text": "t",
                        "severity": "warn",
                        "check": {"kind": "command", "argv": argv},
                    }
                ]
            }
        ),
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    started(repo)
    TrustStore().approve(repo_identity(git_agentckpt.open(str(repo)).repo), argv, "test")
    adds.reset()
    out = resume(repo)
    assert (repo / "made-by-check.txt").exists()
    assert adds.count() == 1
    assert out["resume_checkpoint"]["tree"] == full_snapshot(repo)


# -- restore -----------------------------------------------------------------------------


def test_restore_with_a_safety_checkpoint_snapshots_once(repo: Path, adds: GitAdds) -> None:
    first = started(repo)
    write(repo / "src" / "app.py", "print('broken')\n")
    write(repo / "scratch.txt", "not in any checkpoint\n")
    on_disk = full_snapshot(repo)
    adds.reset()
    done = ckpt_json(repo, "restore", str(first["id"]))
    assert adds.count() == 1
    safety = done["safety_checkpoint"]
    assert safety is not None and safety["tree"] == on_disk  # the safety holds the drift
    listed = [(c["kind"], c["trigger"]) for c in ckpt_json(repo, "list", "t")[:2]]
    assert listed[0] == ("full", "pre_restore") and listed[1][1] != "pre_restore"  # one
    assert full_snapshot(repo) == first["tree"]
    ckpt(repo, "restore", str(safety["id"]))  # and it can be undone
    assert (repo / "scratch.txt").read_text() == "not in any checkpoint\n"


# -- check -------------------------------------------------------------------------------


def check_tree(repo: Path) -> str:
    out = ckpt_json(repo, "check", "t")
    return str(out["tree"])


def test_check_with_nothing_changed_takes_no_snapshot(repo: Path, adds: GitAdds) -> None:
    made = started(repo)
    adds.reset()
    assert check_tree(repo) == made["tree"]
    assert adds.count() == 0
    assert check_tree(repo) == made["tree"]
    assert adds.count() == 0


@pytest.mark.parametrize(
    "change",
    [
        "edit",
        "same-size edit",
        "new file",
        "delete",
        "gitignore edit",
        "gitignore new",
        "mode",
        "symlink",
        "file to dir",
        "touch",
    ],
)
def test_check_sees_every_change_a_full_snapshot_sees(
    repo: Path, adds: GitAdds, change: str
) -> None:
    write(repo / "build.tmp", "scratch\n")  # untracked, not ignored: in every snapshot
    started(repo)
    check_tree(repo)  # the last snapshot is now check's own
    app = repo / "src" / "app.py"
    if change == "edit":
        write(app, "print('changed')\n")
    elif change == "same-size edit":  # right after the snapshot: git's racy-git case
        app.write_text("print('ho')\n")
    elif change == "new file":
        write(repo / "src" / "new.py", "x = 1\n")
    elif change == "delete":
        (repo / "results.csv").unlink()
    elif change == "gitignore edit":
        write(repo / ".gitignore", "*.log\nbuild/\n*.tmp\n")
    elif change == "gitignore new":
        write(repo / "src" / ".gitignore", "*.py\n")
        write(repo / "src" / "other.py", "y = 2\n")
    elif change == "mode":
        os.chmod(app, 0o755)
    elif change == "symlink":
        os.symlink("app.py", repo / "src" / "link")
    elif change == "file to dir":
        (repo / "results.csv").unlink()
        write(repo / "results.csv" / "inner.txt", "now a directory\n")
    elif change == "touch":
        os.utime(app, ns=(1, 1))
    adds.reset()
    assert check_tree(repo) == full_snapshot(repo)
    if change != "touch":
        assert adds.count() >= 1
    assert check_tree(repo) == full_snapshot(repo)  # and again, now without a change


def test_check_after_the_user_stages_a_change(repo: Path, adds: GitAdds) -> None:
    """The user's index moved (a `git add`): the private index is seeded again, and the
    tree is the full snapshot's."""
    started(repo)
    check_tree(repo)
    write(repo / "README.md", "staged by the user\n")
    git(repo, "add", "README.md")
    assert check_tree(repo) == full_snapshot(repo)
