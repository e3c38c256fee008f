"""A shared repository keeps an append-only trail: `git ckpt hooks install --server`.

Every refusal is read in full by the pushing client, over a file path (receive-pack's
stderr is the client's) and over `git daemon` on 127.0.0.1 (only the sideband reaches
the client): each `remote: git ckpt: …` line, never "the remote end hung up".
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git
from git_daemon import git_daemon
from helpers import ckpt, ckpt_json, write
from push_helpers import run_git, tampered_task

from git_agentckpt.hook_shims import SHIMS

ROOT = Path(__file__).resolve().parent.parent
HUNG_UP = "remote end hung up"


@pytest.fixture(params=["file", "git-daemon"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A bare repository with the server hook, and the URL a client pushes to: its path,
    or git://127.0.0.1 through a `git daemon` this test starts and stops."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    out = ckpt(remote, "hooks", "install", "--server").stdout
    assert "installed" in out and "pre-receive" in out
    if request.param == "file":
        yield remote, str(remote)
    else:
        with git_daemon(tmp_path) as (base, _log):
            yield remote, f"{base}/remote.git"


@pytest.fixture
def client(served: tuple[Path, str], tmp_path: Path) -> tuple[Path, Path, str]:
    """A clone with task `t` (two checkpoints) pushed to the server by `git ckpt push`."""
    remote, url = served
    repo = tmp_path / "client"
    git(tmp_path, "init", "-q", str(repo))
    write(repo / "README.md", "hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    git(repo, "remote", "add", "origin", url)
    git(repo, "push", "-q", "origin", "HEAD:refs/heads/main")
    ckpt(repo, "task", "start", "t", "--goal", "audited work")
    write(repo / "work.txt", "one\n")
    ckpt(repo, "create", "-t", "t", "-m", "first")
    assert "pushed to origin" in ckpt(repo, "push").stdout
    return repo, remote, url


def tip(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref)


def assert_refused_in_full(proc: subprocess.CompletedProcess[str], ref: str, why: str) -> None:
    """The client read every line of the refusal: the ref and reason, the summary, a fix."""
    assert proc.returncode != 0
    err = proc.stderr
    assert f"remote: git ckpt: refused {ref}: {why}" in err, err
    assert "remote: git ckpt: push refused: nothing was changed on this server" in err, err
    assert "remote: git ckpt: fix: " in err, err
    assert "pre-receive hook declined" in err, err
    assert HUNG_UP not in err, err


def test_shims_in_hooks_dir_are_the_packaged_ones() -> None:
    for name, text in SHIMS.items():
        assert (ROOT / "hooks" / name).read_text() == text
        assert os.access(ROOT / "hooks" / name, os.X_OK)


def test_honest_pushes_are_accepted_and_seen_through_quarantine(
    client: tuple[Path, Path, str],
) -> None:
    repo, remote, _ = client
    for ref in ("refs/agent/checkpoints/t", "refs/agent/events/t", "refs/notes/agent/state"):
        assert tip(remote, ref) == tip(repo, ref)
    # a new checkpoint: its commit and its prepare event reach the hook in quarantine only
    write(repo / "work.txt", "two\n")
    made = ckpt_json(repo, "create", "-t", "t", "-m", "second")
    pushed = ckpt(repo, "push")
    assert "refused" not in pushed.stdout + pushed.stderr
    assert tip(remote, "refs/agent/checkpoints/t") == made["commit"]


def test_branches_are_never_blocked(client: tuple[Path, Path, str]) -> None:
    repo, remote, _ = client
    write(repo / "b.txt", "b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "b")
    assert run_git(repo, "push", "origin", "HEAD:refs/heads/feature").returncode == 0
    # even a forced rewrite of a branch is the repository's business, not the trail's
    rewound = run_git(repo, "push", "origin", "+HEAD~1:refs/heads/feature")
    assert rewound.returncode == 0, rewound.stderr
    assert "git ckpt" not in rewound.stderr
    deleted = run_git(repo, "push", "origin", ":refs/heads/feature")
    assert deleted.returncode == 0, deleted.stderr
    assert run_git(remote, "rev-parse", "--verify", "-q", "refs/heads/feature").returncode != 0


def test_a_forced_push_of_an_audit_ref_is_refused_in_full(
    client: tuple[Path, Path, str],
) -> None:
    repo, remote, _ = client
    before = {r: tip(remote, r) for r in ("refs/agent/checkpoints/t", "refs/notes/agent/state")}
    forced = run_git(repo, "push", "origin", "+refs/agent/checkpoints/t~1:refs/agent/checkpoints/t")
    assert_refused_in_full(forced, "refs/agent/checkpoints/t", "not a fast-forward")
    assert "run `git ckpt push`" in forced.stderr  # the fix for a rewrite
    rewind = "+refs/notes/agent/state~1:refs/notes/agent/state"
    notes = run_git(repo, "push", "-q", "origin", rewind)
    assert_refused_in_full(notes, "refs/notes/agent/state", "not a fast-forward")
    assert {r: tip(remote, r) for r in before} == before


def test_a_deletion_of_an_audit_ref_is_refused_in_full(client: tuple[Path, Path, str]) -> None:
    repo, remote, _ = client
    for ref in ("refs/agent/events/t", "refs/notes/agent/state", "refs/agent/checkpoints/t"):
        gone = run_git(repo, "push", "origin", f":{ref}")
        assert_refused_in_full(gone, ref, "audit refs are never deleted")
        assert "append-only" in gone.stderr
        assert tip(remote, ref) == tip(repo, ref)


def rogue_checkpoint(repo: Path, parent: str, task: str = "t") -> str:
    """A commit that claims to be a checkpoint of `task`, written past `git ckpt`."""
    message = f"checkpoint 9 of {task}\n\nCheckpoint-Id: FORGED\nTask: {task}\n"
    return git(repo, "commit-tree", "-p", parent, "-m", message, "HEAD^{tree}")


def test_a_checkpoint_without_its_prepare_event_is_refused(
    client: tuple[Path, Path, str],
) -> None:
    repo, remote, _ = client
    before = tip(remote, "refs/agent/checkpoints/t")
    rogue = rogue_checkpoint(repo, before)
    ckpt(repo, "event", "t", "--type", "note", "--json", '{"n": 1}')
    # pushed with the event log (one event longer), atomically: no prepare for it there
    pushed = run_git(
        repo,
        "push",
        "--atomic",
        "origin",
        f"{rogue}:refs/agent/checkpoints/t",
        "refs/agent/events/t:refs/agent/events/t",
    )
    assert_refused_in_full(
        pushed, "refs/agent/checkpoints/t", f"no checkpoint.prepare event for {rogue[:12]}"
    )
    assert "refs/agent/events/t as pushed (write-ahead order)" in pushed.stderr
    # a forged commit under a genuine one is found too, not only the tip
    deeper = rogue_checkpoint(repo, rogue)
    again = run_git(repo, "push", "origin", f"{deeper}:refs/agent/checkpoints/t")
    assert f"{deeper[:12]}, {rogue[:12]}" in again.stderr and again.returncode != 0
    assert tip(remote, "refs/agent/checkpoints/t") == before


def test_a_commit_of_another_task_or_none_is_refused(client: tuple[Path, Path, str]) -> None:
    repo, _, _ = client
    other = rogue_checkpoint(repo, tip(repo, "refs/agent/checkpoints/t"), task="u")
    pushed = run_git(repo, "push", "origin", f"{other}:refs/agent/checkpoints/t")
    assert_refused_in_full(pushed, "refs/agent/checkpoints/t", f"{other[:12]} is a checkpoint of")
    plain = run_git(repo, "push", "origin", "HEAD:refs/agent/checkpoints/new")
    head = tip(repo, "HEAD")[:12]
    assert_refused_in_full(plain, "refs/agent/checkpoints/new", f"{head} is not a checkpoint")


def test_git_ckpt_push_names_the_servers_refusal_on_one_line(
    client: tuple[Path, Path, str],
) -> None:
    repo, remote, _ = client
    rogue = rogue_checkpoint(repo, tip(repo, "refs/agent/checkpoints/t"))
    git(repo, "update-ref", "refs/agent/checkpoints/t", rogue)  # no client hook here
    result = ckpt(repo, "push", ok=False)
    assert result.exit_code == 1
    lines = [x for x in result.stderr.splitlines() if x.startswith("git ckpt: error:")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"git ckpt: error: git push origin was refused by the remote's pre-receive hook: "
        f"refs/agent/checkpoints/t: no checkpoint.prepare event for {rogue[:12]}"
    )
    assert "fix: push a checkpoint together with its task's event log" in lines[0]
    assert tip(remote, "refs/agent/checkpoints/t") != rogue


def test_a_push_mixing_a_refused_audit_ref_and_a_branch_says_so(
    client: tuple[Path, Path, str],
) -> None:
    repo, remote, _ = client
    mixed = run_git(repo, "push", "origin", ":refs/agent/events/t", "HEAD:refs/heads/side")
    assert_refused_in_full(mixed, "refs/agent/events/t", "audit refs are never deleted")
    assert "the 1 other ref(s) of this push were refused with it" in mixed.stderr
    alone = run_git(repo, "push", "origin", "HEAD:refs/heads/side")
    assert alone.returncode == 0, alone.stderr
    assert tip(remote, "refs/heads/side") == tip(repo, "HEAD")


def test_a_users_pre_receive_is_chained(served: tuple[Path, str], tmp_path: Path) -> None:
    remote, url = served
    ckpt(remote, "hooks", "uninstall", "--server")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\n"
        "input=$(cat)\n"
        'printf "%s\\n" "$input" >> "$GIT_DIR/user-hook-saw"\n'
        'case "$input" in *refs/heads/frozen*)\n'
        '  echo "policy: refs/heads/frozen is frozen" >&2; exit 1 ;;\nesac\n'
    )
    hook.chmod(0o755)
    out = ckpt(remote, "hooks", "install", "--server").stdout
    assert "kept your pre-receive hook as pre-receive.ckpt-user" in out
    assert ckpt_json(remote, "hooks", "status")["pre-receive"] == "installed"
    repo = tmp_path / "c"
    git(tmp_path, "clone", "-q", url, str(repo))
    write(repo / "a", "a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    assert run_git(repo, "push", "origin", "HEAD:refs/heads/main").returncode == 0
    frozen = run_git(repo, "push", "origin", "HEAD:refs/heads/frozen")
    assert frozen.returncode != 0 and "remote: policy: refs/heads/frozen is frozen" in frozen.stderr
    # the user's hook runs first and sees the same input; then ours judges the trail
    ckpt(repo, "task", "start", "t", "--goal", "g")
    ckpt(repo, "push")
    assert "refs/agent/events/t" in (remote / "user-hook-saw").read_text()
    deleted = run_git(repo, "push", "origin", ":refs/agent/events/t")
    assert_refused_in_full(deleted, "refs/agent/events/t", "audit refs are never deleted")
    ckpt(remote, "hooks", "uninstall", "--server")
    assert "policy" in hook.read_text() and not (remote / "hooks/pre-receive.ckpt-user").exists()


def test_install_server_replaces_the_reference_transaction_shim(tmp_path: Path) -> None:
    remote = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    ckpt(remote, "hooks", "install")
    assert ckpt_json(remote, "hooks", "status")["reference-transaction"] == "installed"
    out = ckpt(remote, "hooks", "install", "--server").stdout
    assert "remote end hung up unexpectedly" in out
    state = ckpt_json(remote, "hooks", "status")
    assert state["pre-receive"] == "installed" and state["reference-transaction"] == "missing"


def test_why_not_the_reference_transaction_hook_on_a_server(tmp_path: Path) -> None:
    """What the client of a git:// server read when the server's guard was the
    reference-transaction hook: the refusal went to the daemon's log, and the client got
    "the remote end hung up". The same refusal from pre-receive is read in full."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    ckpt(remote, "hooks", "install")  # the client's hooks, on a server
    repo = tmp_path / "c"
    git(tmp_path, "init", "-q", str(repo))
    write(repo / "a", "a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    with git_daemon(tmp_path) as (base, log):
        url = f"{base}/remote.git"
        git(repo, "remote", "add", "origin", url)
        ckpt(repo, "push")
        rogue = rogue_checkpoint(repo, tip(repo, "refs/agent/checkpoints/t"))
        cut = run_git(repo, "push", "origin", f"{rogue}:refs/agent/checkpoints/t")
        assert cut.returncode != 0 and HUNG_UP in cut.stderr
        assert "no checkpoint.prepare" not in cut.stderr
        assert "no checkpoint.prepare" in log.read_text()  # said to the daemon, not to us
        ckpt(remote, "hooks", "install", "--server")
        told = run_git(repo, "push", "origin", f"{rogue}:refs/agent/checkpoints/t")
        assert_refused_in_full(told, "refs/agent/checkpoints/t", "no checkpoint.prepare event")


def test_reading_commands_work_in_the_bare_repository(client: tuple[Path, Path, str]) -> None:
    """A trail is audited where it is stored: the server's bare repository."""
    repo, remote, _ = client
    ckpt(repo, "resume", "t", ok=False)  # writes a recovery report, whatever its outcome
    ckpt(repo, "push")
    listed = ckpt_json(remote, "list", "t")
    assert [c["commit"] for c in listed] == [c["commit"] for c in ckpt_json(repo, "list", "t")]
    logged = [
        e["type"]
        for e in map(json.loads, ckpt(remote, "log", "t", "--json").stdout.split("\n")[:-1])
    ]
    assert logged[:3] == ["task.start", "checkpoint.prepare", "checkpoint.commit"]
    shown = ckpt_json(remote, "show", "t~1")
    assert shown["state"]["goal"] == "audited work"
    assert ckpt_json(remote, "task", "show", "t")["goal"] == "audited work"
    assert "audited work" in ckpt(remote, "task", "list").stdout
    changed = ckpt_json(remote, "diff", "t~2", "t~1")
    assert {"status": "A", "path": "work.txt"}.items() <= changed["files"][0].items()
    reports = ckpt_json(remote, "report", "t", "--list")
    assert reports and reports == ckpt_json(repo, "report", "t", "--list")
    assert ckpt_json(remote, "report", "t")["id"] == reports[-1]["id"]
    # the audit commands too: verify, metrics, timeline, export
    assert ckpt_json(remote, "verify", "t")["ok"] is True
    there, here = ckpt_json(remote, "metrics", "t"), ckpt_json(repo, "metrics", "t")
    assert there.pop("elapsed_ms") >= 0 and here.pop("elapsed_ms") >= 0
    assert there == here
    page = remote.parent / "timeline.html"
    ckpt(remote, "timeline", "t", "--html", str(page))
    assert "audited work" in page.read_text()
    ckpt(remote, "export", "t", "--to", str(remote.parent / "exported"))
    assert (remote.parent / "exported" / "export.json").is_file()
    # what needs a work tree says so, and names what works here
    for args in (
        ("create", "-t", "t"),
        ("resume", "t"),
        ("restore", "t~1"),
        ("step", "start", "t", "s"),
    ):
        refused = ckpt(remote, *args, ok=False)
        assert refused.exit_code == 4, (args, refused.output)
        assert (
            "is a bare repository" in refused.stderr and "read a bare repository" in refused.stderr
        )


def test_a_trail_verify_rejects_is_refused_in_full(client: tuple[Path, Path, str]) -> None:
    repo, remote, _ = client
    tampered_task(repo)
    assert ckpt(repo, "verify", "u", ok=False).exit_code == 6
    pushed = run_git(
        repo,
        "push",
        "--atomic",
        "origin",
        "refs/agent/checkpoints/u:refs/agent/checkpoints/u",
        "refs/agent/events/u:refs/agent/events/u",
    )
    assert_refused_in_full(pushed, "refs/agent/checkpoints/u", "error: task u: ")
    assert "fix: run `git ckpt verify` in your clone" in pushed.stderr
    assert run_git(remote, "rev-parse", "--verify", "-q", "refs/agent/events/u").returncode != 0


def test_an_assertions_note_no_prepare_bound_is_refused(client: tuple[Path, Path, str]) -> None:
    """Issue 26 item 4: a note added with `git notes add -f` where the checkpoint's prepare
    event named none. Before: accepted (and the next resume acted on it)."""
    repo, remote, _ = client
    checkpoint = tip(repo, "refs/agent/checkpoints/t")
    check = {"kind": "file_exists", "file": "nowhere.txt"}
    note = json.dumps({"v": 1, "assertions": [{"id": "forged", "check": check}]})
    git(repo, "notes", "--ref", "agent/assertions", "add", "-f", "-m", note, checkpoint)
    ref = "refs/notes/agent/assertions"
    pushed = run_git(repo, "push", "origin", f"{ref}:{ref}")
    assert_refused_in_full(
        pushed, "the trail of task t", f"error: task t: note-added at {checkpoint}"
    )
    assert run_git(remote, "rev-parse", "--verify", "-q", ref).returncode != 0
