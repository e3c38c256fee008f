"""Signed trails: checkpoint, event and report commits signed by real git, and checked.

When git signing is configured, the commits of the audit trail are created by
`git commit-tree -S`, so git's own signing machinery does the work: `gpg.format`
(`openpgp`, `ssh`, `x509`), `user.signingKey` (a key id, a public key file, or a
literal `key::…`), `gpg.ssh.defaultKeyCommand`, `gpg.program`, `gpg.<fmt>.program`
and an ssh or gpg agent all behave as they do for `git commit -S`. Without
signing the commit is written by pygit2 (no process started), the fast path.

Whether to sign, from git config (read at every commit, so a change is seen at
once, also by the warm daemon):
- `ckpt.sign false`: never; `ckpt.sign true`: always (a key git cannot use is an
  error, never a silent unsigned commit);
- `ckpt.sign auto` (the default): when `user.signingKey` is set, or when
  `commit.gpgSign` is true (git itself signs the user's commits then).

The checks read git's verdict on each commit (`%G?`, the code behind
`git verify-commit`), all of them in one `git log --no-walk` run: for ssh
against `gpg.ssh.allowedSignersFile`, for openpgp and x509 against the keyring.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from git_agentckpt.errors import RepositoryError
from git_agentckpt.git.run import env_for, error_lines
from git_agentckpt.git.syserr import git_failure

SIGN_SETTING = "ckpt.sign"
FORMATS = ("openpgp", "ssh", "x509")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")

# %G? letters -> status. U: a valid signature from a key that is not trusted (openpgp)
# or not in the allowed signers file (ssh); E: the signature cannot be checked (the
# key is not in the keyring, no allowed signers file).
GOOD, BAD, UNSIGNED, UNKNOWN_SIGNER = "good", "bad", "unsigned", "unknown_signer"
# signed, but git here cannot check it (for ssh: no gpg.ssh.allowedSignersFile, so git
# reports "N" as for an unsigned commit: the object's own header tells them apart)
UNCHECKED = "unchecked"
_UNCHECKED_DETAIL = (
    "signed, but git cannot check the signature here "
    "(for ssh signatures: gpg.ssh.allowedSignersFile is not set)"
)
_STATUS = {
    "G": GOOD,
    "B": BAD,
    "N": UNSIGNED,
    "U": UNKNOWN_SIGNER,
    "E": UNKNOWN_SIGNER,
    "X": BAD,  # a good signature that has expired
    "Y": BAD,  # a good signature by a key that has expired
    "R": BAD,  # a signature by a revoked key
}
_DETAIL = {
    "G": "good signature from an allowed signer",
    "B": "bad signature: the commit was changed after it was signed",
    "N": "no signature",
    "U": "valid signature, but the signer is not allowed (not in gpg.ssh.allowedSignersFile "
    "for ssh, not trusted in the keyring for openpgp)",
    "E": "the signature cannot be checked: its key is unknown "
    "(for ssh, set gpg.ssh.allowedSignersFile)",
    "X": "the signature has expired",
    "Y": "signed by a key that has expired",
    "R": "signed by a revoked key",
}


class ConfigReader(Protocol):
    """What the signing decision needs of a repository (`GitRepo` is one)."""

    workdir: str

    def config_get(self, key: str) -> str | None: ...

    def config_values(self, keys: Sequence[str]) -> list[str | None]: ...

    def is_signed(self, oid: str) -> bool: ...


@dataclass(frozen=True)
class Signing:
    """How commits are signed: git's format and key (None: git's default key)."""

    format: str
    key: str | None

    def describe(self) -> str:
        key = f" key {self.key}" if self.key else " (git's default key)"
        return f"{self.format}{key}"


@dataclass(frozen=True)
class SignatureCheck:
    """git's verdict on one commit's signature."""

    commit: str
    status: str  # good | bad | unsigned | unknown_signer | unchecked
    signer: str  # the principal (ssh) or user id (openpgp); "" when unknown
    key: str  # the key's fingerprint or id; "" when unsigned
    code: str  # git's %G? letter
    detail: str

    @property
    def ok(self) -> bool:
        return self.status == GOOD

    def to_json(self) -> dict[str, str]:
        return {
            "commit": self.commit,
            "status": self.status,
            "signer": self.signer,
            "key": self.key,
            "code": self.code,
            "detail": self.detail,
        }


class SigningError(RepositoryError):
    """git could not sign a commit: no ref moved (exit status 4)."""


def _flag(value: str | None) -> bool | None:
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def signing_of(repo: ConfigReader) -> Signing | None:
    """The signing git config asks for, or None: the commit is not signed."""
    # one config read on the unsigned path (every commit asks): about 20 us
    sign, key, gpg_sign = repo.config_values([SIGN_SETTING, "user.signingKey", "commit.gpgSign"])
    setting = (sign or "auto").strip().lower()
    if _flag(setting) is False:
        return None
    key = key or None
    if setting == "auto" and key is None and not _flag(gpg_sign):
        return None
    if setting not in ("auto", *_TRUE):
        raise RepositoryError(
            f"git config {SIGN_SETTING} is {setting!r}",
            hint=f"set it to true, false or auto: git config {SIGN_SETTING} auto",
        )
    fmt = (repo.config_get("gpg.format") or "openpgp").strip().lower()
    if fmt not in FORMATS:
        raise RepositoryError(
            f"git config gpg.format is {fmt!r}, which git cannot sign with",
            hint="set it to openpgp, ssh or x509, or turn signing off: "
            f"git config {SIGN_SETTING} false",
        )
    return Signing(fmt, key)


@dataclass(frozen=True)
class Identity:
    """Author and committer of a commit, as git's environment variables spell them."""

    name: str
    email: str
    time: int  # unix seconds
    offset: int  # minutes east of UTC

    def env(self) -> dict[str, str]:
        sign = "+" if self.offset >= 0 else "-"
        hours, minutes = divmod(abs(self.offset), 60)
        date = f"@{self.time} {sign}{hours:02d}{minutes:02d}"
        out: dict[str, str] = {}
        for who in ("AUTHOR", "COMMITTER"):
            out[f"GIT_{who}_NAME"] = self.name
            out[f"GIT_{who}_EMAIL"] = self.email
            out[f"GIT_{who}_DATE"] = date
        return out


def commit_signed(
    repo: ConfigReader,
    signing: Signing,
    tree: str,
    parents: Iterable[str],
    message: str,
    who: Identity,
) -> str:
    """Write a signed commit with `git commit-tree -S`; its id. Nothing else is written:
    on failure no object is stored and a SigningError says how to fix the key."""
    args = ["commit-tree", "-S"]
    for parent in parents:
        args += ["-p", parent]
    args += [tree]
    env = env_for(repo.workdir, who.env())
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=repo.workdir,
            env=env,
            input=message.encode("utf-8"),
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise RepositoryError("git is not installed or not on PATH", hint="install git") from exc
    oid = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode != 0 or not oid:
        refused = git_failure(proc.stderr, repo.workdir, "cannot write a signed commit")
        if refused is not None:  # a full disk, a read-only store: the machine, not the key
            raise refused
        raise SigningError(_failure(signing, proc.stderr), hint=_fix(signing))
    return oid


def _failure(signing: Signing, stderr: bytes) -> str:
    lines = [
        ln
        for ln in error_lines(stderr)
        if not ln.startswith("fatal: failed to write commit object")
    ]
    why = lines[0] if lines else "git commit-tree -S failed"
    for prefix in ("error: ", "fatal: "):
        why = why.removeprefix(prefix)
    if len(why) > 300:
        why = why[:299] + "…"
    return f"cannot sign the commit with {signing.describe()}: {why}"


def _fix(signing: Signing) -> str:
    off = f"or turn signing off: git config {SIGN_SETTING} false"
    if signing.format == "ssh":
        return (
            "point user.signingKey at a readable ssh key (or load it: ssh-add) and "
            f"run the command again; nothing was recorded ({off})"
        )
    lister = "gpgsm" if signing.format == "x509" else "gpg"
    return (
        f"make the key usable ({lister} --list-secret-keys shows the keys; unlock the "
        f"agent) and run the command again; nothing was recorded ({off})"
    )


_FORMAT = "%H%x00%G?%x00%GS%x00%GF%x00%GK%x00"


def check_signatures(repo: ConfigReader, commits: Iterable[str]) -> dict[str, SignatureCheck]:
    """git's verdict on each commit's signature, in one `git log` process (one signature
    program run per signed commit: ssh-keygen or gpg)."""
    wanted = list(dict.fromkeys(commits))
    if not wanted:
        return {}
    args = ["log", "--no-walk=unsorted", "--stdin", f"--format={_FORMAT}"]
    found = _parse(_log(repo, args, ("\n".join(wanted) + "\n").encode("ascii")))
    return {commit: _told_apart(repo, check) for commit, check in found.items()}


def check_chain_signatures(repo: ConfigReader, tip: str) -> list[SignatureCheck]:
    """git's verdict on every commit of `tip`'s first-parent chain, oldest first."""
    args = ["log", "--first-parent", "--reverse", f"--format={_FORMAT}", tip, "--"]
    return [_told_apart(repo, check) for check in _parse(_log(repo, args, None)).values()]


def _told_apart(repo: ConfigReader, check: SignatureCheck) -> SignatureCheck:
    """git reports "N" both for an unsigned commit and for one it cannot check."""
    if check.code == "N" and repo.is_signed(check.commit):
        return replace(check, status=UNCHECKED, detail=_UNCHECKED_DETAIL)
    return check


def _log(repo: ConfigReader, args: list[str], stdin: bytes | None) -> bytes:
    proc = subprocess.run(  # env_for: a push's quarantine too (`run.keep_object_dirs`)
        ["git", *args],
        cwd=repo.workdir,
        env=env_for(repo.workdir),
        input=stdin,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        msg = error_lines(proc.stderr)
        raise RepositoryError(
            f"cannot check signatures: {msg[-1] if msg else proc.returncode}",
            hint="run `git fsck` to see which objects are missing",
        )
    return proc.stdout


def _parse(out: bytes) -> dict[str, SignatureCheck]:
    fields = out.decode("utf-8", "replace").split("\0")
    result: dict[str, SignatureCheck] = {}
    for i in range(0, len(fields) - 4, 5):
        commit, code, signer, fingerprint, key = (f.strip() for f in fields[i : i + 5])
        status = _STATUS.get(code, UNKNOWN_SIGNER)
        detail = _DETAIL.get(code, f"git reports signature status {code!r}")
        result[commit] = SignatureCheck(commit, status, signer, fingerprint or key, code, detail)
    return result


def check_signature(repo: ConfigReader, commit: str) -> SignatureCheck:
    """git's verdict on one commit's signature (`check_signatures` for many)."""
    found = check_signatures(repo, [commit])
    if commit not in found:
        raise RepositoryError(f"cannot check the signature of {commit}: git did not report it")
    return found[commit]
