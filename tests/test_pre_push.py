"""The client's pre-push hook: no secret leaves in a push, and the refusal names the
object (blob and path, with the commit that brings it in; or the commit) and the rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import BIN_DIR, ckpt, remote_and_clones, write
from push_helpers import run_git, tampered_task

# Fake secrets, put together here so that no scanner trips over this file.
GITHUB_TOKEN = "ghp_" + "Ab1" * 12
AWS_KEY = "AKIA" + "IOSFODNN7" + "EXAMPLE"


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, Path]:
    """Clone `a` of a bare remote (one commit on main), with `git ckpt hooks install`."""
    remote, a, _ = remote_and_clones(tmp_path, clone_b=False)
    out = ckpt(a, "hooks", "install").stdout
    assert "pre-push" in out
    return remote, a


def commit(repo: Path, path: str, text: str) -> str:
    write(repo / path, text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"add {path}")
    return git(repo, "rev-parse", "HEAD")


def remote_has(remote: Path, ref: str) -> bool:
    return run_git(remote, "rev-parse", "--verify", "-q", ref).returncode == 0


def test_a_clean_push_goes_quietly(clone: tuple[Path, Path]) -> None:
    remote, a = clone
    made = commit(a, "src/app.py", "def token_count(text):\n    return len(text.split())\n")
    pushed = run_git(a, "push", "origin", "HEAD:main")
    assert pushed.returncode == 0, pushed.stderr
    assert "git ckpt" not in pushed.stderr
    assert git(remote, "rev-parse", "main") == made


def test_a_secret_in_a_branch_commit_is_refused_with_blob_path_commit_and_rule(
    clone: tuple[Path, Path],
) -> None:
    remote, a = clone
    before = git(remote, "rev-parse", "main")
    commit(a, "README.md", "docs\n")
    bad = commit(a, "config/settings.py", f"DEBUG = True\nGITHUB = '{GITHUB_TOKEN}'\n")
    blob = git(a, "rev-parse", "HEAD:config/settings.py")
    pushed = run_git(a, "push", "origin", "HEAD:main")
    assert pushed.returncode != 0
    err = pushed.stderr
    assert "git ckpt: refused push to origin: 1 secret(s) in the objects about to leave" in err
    assert (
        f"git ckpt:   blob {blob[:12]} config/settings.py (commit {bad[:12]}), line 2: "
        "rule github-token"
    ) in err, err
    assert "git push --no-verify" in err
    assert GITHUB_TOKEN not in err  # the secret itself is never printed
    assert git(remote, "rev-parse", "main") == before
    # what the remote already has is not scanned again: fixed on top, the push goes
    git(a, "reset", "-q", "--hard", "HEAD~1")
    assert run_git(a, "push", "origin", "HEAD:main").returncode == 0


@pytest.mark.parametrize("hooks", ["installed", "not installed"])
def test_a_secret_in_a_checkpoint_tree_is_refused_by_git_ckpt_push(
    clone: tuple[Path, Path], hooks: str
) -> None:
    """`git ckpt push` scans what it sends itself, hook or not (issue 26, item 13)."""
    remote, a = clone
    if hooks == "not installed":
        ckpt(a, "hooks", "uninstall")
    ckpt(a, "task", "start", "t", "--goal", "g")
    write(a / "notes" / "aws.txt", f"the key is {AWS_KEY}\n")  # untracked: in the snapshot
    made = ckpt(a, "create", "-t", "t", "--json").stdout
    blob = git(a, "rev-parse", "refs/agent/checkpoints/t:notes/aws.txt")
    checkpoint = git(a, "rev-parse", "refs/agent/checkpoints/t")
    assert checkpoint in made
    result = ckpt(a, "push", ok=False)
    assert result.exit_code == 1
    errors = [x for x in result.stderr.splitlines() if x.startswith("git ckpt: error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0] == (
        "git ckpt: error: push to origin refused by the secret scan: 1 secret(s) in the "
        "objects about to leave (nothing was sent): "
        f"blob {blob[:12]} notes/aws.txt (commit {checkpoint[:12]}), line 1: rule aws-key; "
        "put the file's path in [snapshot] secret_paths, so that later checkpoints leave "
        "it out, and revoke the secret; if it is no secret, `git config --add ckpt.scanSkip "
        "GLOB` lets its path go"
    ), errors[0]
    assert AWS_KEY not in result.stderr
    assert not remote_has(remote, "refs/agent/checkpoints/t")
    assert not remote_has(remote, "refs/agent/events/t")
    git(a, "config", "--add", "ckpt.scanSkip", "notes/**")  # no secret after all: it goes
    assert "pushed to origin" in ckpt(a, "push").stdout
    assert remote_has(remote, "refs/agent/checkpoints/t")


def test_a_secret_planted_in_a_raw_event_object_is_refused(clone: tuple[Path, Path]) -> None:
    remote, a = clone
    ckpt(a, "task", "start", "t", "--goal", "g")
    tip = git(a, "rev-parse", "refs/agent/events/t")
    line = '{"v":1,"type":"note","data":{"text":"' + GITHUB_TOKEN + '"}}'
    planted = git(
        a,
        "commit-tree",
        "-p",
        tip,
        "-m",
        f"event note\n\n{line}",
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    )
    env = dict(os.environ, GIT_CKPT_HOOK_BYPASS="1", PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    subprocess.run(
        ["git", "update-ref", "refs/agent/events/t", planted], cwd=a, env=env, check=True
    )
    pushed = run_git(a, "push", "origin", "refs/agent/events/t:refs/agent/events/t")
    assert pushed.returncode != 0
    assert (
        f"git ckpt:   commit {planted[:12]}, message line 3: rule github-token" in pushed.stderr
    ), pushed.stderr
    assert not remote_has(remote, "refs/agent/events/t")


def test_large_binary_blobs_are_skipped_with_a_note(clone: tuple[Path, Path]) -> None:
    remote, a = clone
    git(a, "config", "ckpt.scanBinaryLimit", "1k")
    big = b"\0\1\2" * 400 + f" {AWS_KEY} ".encode()  # 1.2 kB, binary: not scanned
    small = b"\0" + f" {AWS_KEY} ".encode()  # binary but small: scanned
    (a / "big.bin").write_bytes(big)
    git(a, "add", "-A")
    git(a, "commit", "-qm", "big")
    pushed = run_git(a, "push", "origin", "HEAD:main")
    assert pushed.returncode == 0, pushed.stderr
    blob = git(a, "rev-parse", "HEAD:big.bin")
    assert (
        f"git ckpt: not scanned: binary blob {blob[:12]} big.bin ({len(big)} bytes, "
        "above ckpt.scanBinaryLimit)"
    ) in pushed.stderr
    assert "git ckpt: pre-push scanned" in pushed.stderr and "ms" in pushed.stderr
    (a / "small.bin").write_bytes(small)
    git(a, "add", "-A")
    git(a, "commit", "-qm", "small")
    refused = run_git(a, "push", "origin", "HEAD:main")
    assert refused.returncode != 0 and "small.bin" in refused.stderr
    assert "rule aws-key" in refused.stderr
    assert git(remote, "rev-parse", "main") != git(a, "rev-parse", "HEAD")


def test_a_users_pre_push_is_chained_and_no_verify_skips_both(clone: tuple[Path, Path]) -> None:
    remote, a = clone
    ckpt(a, "hooks", "uninstall")
    hook = a / ".git" / "hooks" / "pre-push"
    hook.write_text(
        "#!/bin/sh\n"
        'echo "$1 $(cat)" >> "$(git rev-parse --git-dir)/user-pre-push"\n'
        'case "$1" in blocked) echo "user policy: not to blocked" >&2; exit 1 ;; esac\n'
    )
    hook.chmod(0o755)
    out = ckpt(a, "hooks", "install").stdout
    assert "kept your pre-push hook as pre-push.ckpt-user" in out
    made = commit(a, "leak.env.txt", f"token={GITHUB_TOKEN}\n")
    pushed = run_git(a, "push", "origin", "HEAD:main")
    assert pushed.returncode != 0 and "rule " in pushed.stderr
    saw = (a / ".git" / "user-pre-push").read_text()
    assert f"origin HEAD {made} refs/heads/main" in saw  # the same input
    git(a, "remote", "add", "blocked", str(remote))
    stopped = run_git(a, "push", "blocked", "HEAD:main")
    assert "user policy: not to blocked" in stopped.stderr
    assert "git ckpt: refused" not in stopped.stderr  # the user's refusal comes first
    forced = run_git(a, "push", "--no-verify", "origin", "HEAD:main")
    assert forced.returncode == 0 and git(remote, "rev-parse", "main") == made
    ckpt(a, "hooks", "uninstall")
    assert "user policy" in hook.read_text()


def test_a_trail_verify_rejects_is_refused_before_it_leaves(
    clone: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, a = clone
    with monkeypatch.context() as m:
        m.setenv("GIT_CKPT_HOOK_BYPASS", "1")  # past this clone's reference-transaction guard
        tampered_task(a)
    pushed = run_git(a, "push", "origin", "refs/agent/events/u:refs/agent/events/u")
    assert pushed.returncode != 0
    assert "git ckpt: refused push to origin: `git ckpt verify` rejects the trail" in pushed.stderr
    assert "git ckpt:   error: task u: " in pushed.stderr, pushed.stderr
    assert "fix: run `git ckpt verify` and repair the trail before pushing" in pushed.stderr
    assert not remote_has(remote, "refs/agent/events/u")
    # an honest task pushes
    ckpt(a, "task", "start", "fine", "--goal", "g")
    ok = run_git(a, "push", "origin", "refs/agent/events/fine:refs/agent/events/fine")
    assert ok.returncode == 0, ok.stderr


def test_a_secret_cut_by_a_chunk_boundary_is_found_on_its_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blobs are read in chunks (a large one streamed on its own): a secret that straddles
    two chunks is found, on the right line, whichever way the blob was read."""
    from git_agentckpt.audit.prepush import check_push
    from git_agentckpt.git import outgoing
    from git_agentckpt.git.repo import GitRepo

    monkeypatch.setattr(outgoing, "CHUNK", 4096)
    monkeypatch.setattr(outgoing, "BATCH_BYTES", 10_000)
    filler = "x = 1\n" * 680  # 4080 bytes: the token starts 16 bytes before a chunk's end
    write(repo / "streamed.txt", filler + f"k {GITHUB_TOKEN}\n" + "y = 2\n" * 3000)
    write(repo / "batched.txt", filler + f"k {AWS_KEY}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "big")
    head = git(repo, "rev-parse", "HEAD")
    result = check_push(
        GitRepo.discover(str(repo)), "nowhere", [("HEAD", head, "refs/heads/main", "0" * 40)]
    )
    found = {(f.path, f.line, f.rule) for f in result.findings}
    assert found == {("streamed.txt", 681, "github-token"), ("batched.txt", 681, "aws-key")}
    assert all(f.commit == head for f in result.findings)


def test_paths_under_scan_skip_are_left_out_and_counted(clone: tuple[Path, Path]) -> None:
    remote, a = clone
    git(a, "config", "--add", "ckpt.scanSkip", "tests/fixtures/**")
    git(a, "config", "--add", "ckpt.scanSkip", "*.golden")
    commit(a, "tests/fixtures/tokens.txt", f"fake: {GITHUB_TOKEN}\n")
    made = commit(a, "out.golden", f"{AWS_KEY}\n")
    pushed = run_git(a, "push", "origin", "HEAD:main")
    assert pushed.returncode == 0, pushed.stderr
    assert "; 2 blob(s) left out by ckpt.scanSkip" in pushed.stderr
    assert git(remote, "rev-parse", "main") == made
    commit(a, "src/real.py", f"KEY = '{GITHUB_TOKEN}'\n")  # elsewhere: still scanned
    refused = run_git(a, "push", "origin", "HEAD:main")
    assert refused.returncode != 0 and "src/real.py" in refused.stderr
