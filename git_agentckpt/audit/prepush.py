"""The client's `pre-push` hook: no secret leaves in a push, no broken trail either.

git runs the hook with the remote's name (or URL) and, on stdin, one line per ref
to push (`<local ref> <local sha> <remote ref> <remote sha>`). `check_push`:

1. lists the objects about to leave: reachable from the pushed tips, not from what
   the remote is known to have (the remote values git gave, its remote-tracking refs
   `refs/remotes/<remote>/*`, and the mirror `git ckpt fetch` keeps of its agent refs,
   `refs/ckpt-remotes/<remote>/*`). That is a superset of what git sends: never less;
2. scans every commit and tag object and every blob with the redaction rules
   (`redact.Redactor.findings`: vendor token shapes, private keys, `NAME=value`
   assignments of secret-looking names, the values of secret-named environment
   variables), in chunks of 1 MiB; a binary blob (a NUL byte in its first 8000 bytes)
   above `ckpt.scanBinaryLimit` bytes (default 4 MiB) is skipped, and named; blobs at
   paths that match a `ckpt.scanSkip` glob (git config, multi-valued: test fixtures
   full of fake tokens) are left out, and counted (a blob is judged by the first path
   `git rev-list --objects` gives it);
3. checks the agent trail the push carries with `git ckpt verify` (the tasks whose
   `refs/agent/*` refs are pushed).

A finding names the object (blob and its path, with the commit that brings it;
or the commit), the line, and the rule, never the secret itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from git_agentckpt.errors import OperationFailed
from git_agentckpt.git.outgoing import (
    OutObject,
    commits_bringing,
    config_values,
    objects_to_send,
    read_objects,
)
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.transport import remote_key
from git_agentckpt.globs import match_any
from git_agentckpt.redact import Redactor, default_redactor
from git_agentckpt.store.guard import ZERO
from git_agentckpt.store.refs import CHECKPOINTS, EVENTS

PREFIX = "git ckpt: "
DEFAULT_BINARY_LIMIT = 4 << 20
BINARY_SNIFF = 8000
OVERLAP = 4096  # bytes carried from one chunk to the next: a secret cut in two is found
MAX_SHOWN = 20

# (local ref, local sha, remote ref, remote sha) per ref of the push
PushLine = tuple[str, str, str, str]
# the trail's problems (one line each) for the tasks named
TrailVerifier = Callable[[GitRepo, list[str]], list[str]]


@dataclass(frozen=True)
class Finding:
    object: str
    type: str  # blob | commit | tag
    path: str
    line: int
    rule: str
    commit: str | None = None  # for a blob: a pushed commit whose tree holds it

    def describe(self) -> str:
        if self.type == "blob":
            brought = f" (commit {self.commit[:12]})" if self.commit else ""
            return (
                f"blob {self.object[:12]} {self.path}{brought}, line {self.line}: rule {self.rule}"
            )
        # commits and tags: the line of the message (0 and below: the object's header)
        where = f"message line {self.line}" if self.line > 0 else "header"
        return f"{self.type} {self.object[:12]}, {where}: rule {self.rule}"


@dataclass
class PushCheck:
    remote: str
    objects: int = 0
    scanned_bytes: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    skipped: list[OutObject] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)
    left_out: int = 0  # blobs at paths `ckpt.scanSkip` names

    @property
    def refused(self) -> bool:
        return bool(self.findings or self.trail)

    def cost(self) -> str:
        mb = self.scanned_bytes / 1e6
        per = f", {self.seconds * 1000 / mb:.1f} ms/MB" if mb >= 0.01 else ""
        skipped = f"; {self.left_out} blob(s) left out by ckpt.scanSkip" if self.left_out else ""
        return (
            f"scanned {self.objects} objects ({mb:.2f} MB) in "
            f"{self.seconds * 1000:.0f} ms{per}{skipped}"
        )

    def not_scanned(self) -> list[str]:
        return [
            f"not scanned: binary blob {blob.id[:12]} {blob.path} ({blob.size} bytes, "
            "above ckpt.scanBinaryLimit)"
            for blob in self.skipped
        ]

    def lines(self) -> list[str]:
        """What the hook says on stderr (nothing for a clean push without skipped blobs)."""
        out = []
        if self.findings:
            out.append(
                f"{PREFIX}refused push to {self.remote}: {len(self.findings)} secret(s) in "
                "the objects about to leave"
            )
            out += [f"{PREFIX}  {f.describe()}" for f in self.findings[:MAX_SHOWN]]
            if len(self.findings) > MAX_SHOWN:
                out.append(f"{PREFIX}  and {len(self.findings) - MAX_SHOWN} more")
        if self.trail:
            out.append(
                f"{PREFIX}refused push to {self.remote}: `git ckpt verify` rejects the trail"
            )
            out += [f"{PREFIX}  {line}" for line in self.trail[:MAX_SHOWN]]
        out += [PREFIX + line for line in self.not_scanned()]
        if self.findings:
            out.append(
                f"{PREFIX}fix: take the secret out of the commit that brings it (amend or "
                "rebase it before pushing; revoke the secret if it ever left); if it is no "
                "secret, push with `git push --no-verify`"
            )
        if self.trail:
            out.append(f"{PREFIX}fix: run `git ckpt verify` and repair the trail before pushing")
        if self.refused or self.skipped or self.left_out:
            out.append(f"{PREFIX}pre-push {self.cost()}")
        return out


def check_push(
    repo: GitRepo,
    remote: str,
    pushed: list[PushLine],
    verify: TrailVerifier | None = None,
    redactor: Redactor | None = None,
) -> PushCheck:
    started = time.perf_counter()
    r = redactor or default_redactor()
    result = PushCheck(r.text(remote))  # as shown: a URL may carry a password
    tips = sorted({local for _, local, _, _ in pushed if local != ZERO})
    exclude = _known_on_remote(repo, remote, pushed)
    objects = objects_to_send(repo, tips, exclude)
    result.objects = len(objects)
    limit = _binary_limit(repo)
    skip = config_values(repo, "ckpt.scanSkip")
    wanted: dict[str, OutObject] = {}
    for o in objects:
        if o.type == "blob" and skip and match_any(skip, o.path):
            result.left_out += 1
        elif o.type in ("blob", "commit", "tag"):
            wanted[o.id] = o
    for oid, chunks in read_objects(repo, list(wanted.values())):
        obj = wanted[oid]
        for rule, line in _scan(obj, chunks, r, limit, result):
            result.findings.append(Finding(obj.id, obj.type, obj.path, line, rule))
    shown = {f.object for f in result.findings[:MAX_SHOWN] if f.type == "blob"}
    brought = commits_bringing(repo, shown, tips, exclude)
    result.findings = [replace(f, commit=brought.get(f.object)) for f in result.findings]
    tasks = _pushed_tasks(pushed)
    if verify is not None and tasks:
        result.trail = verify(repo, tasks)
    result.seconds = time.perf_counter() - started
    return result


def refuse_secrets(repo: GitRepo, remote: str, refs: Sequence[str]) -> PushCheck:
    """`git ckpt push`'s own scan of what it is about to send (`refs`, to the same names
    on `remote`), hook or not; raises when it finds a secret. The scan, for its warnings."""
    tips = [(ref, tip, ref, ZERO) for ref in refs if (tip := repo.read_ref(ref)) is not None]
    result = check_push(repo, remote, tips)
    if not result.findings:
        return result
    shown = [f.describe() for f in result.findings[:3]]
    more = len(result.findings) - len(shown)
    raise OperationFailed(
        f"push to {result.remote} refused by the secret scan: {len(result.findings)} secret(s) "
        "in the objects about to leave (nothing was sent): "
        + "; ".join(shown + ([f"and {more} more"] if more else [])),
        hint="put the file's path in [snapshot] secret_paths, so that later checkpoints "
        "leave it out, and revoke the secret; if it is no secret, `git config --add "
        "ckpt.scanSkip GLOB` lets its path go",
    )


def _known_on_remote(repo: GitRepo, remote: str, pushed: list[PushLine]) -> list[str]:
    """Revisions the remote has: the values git gave for the pushed refs (when we have
    them), its remote-tracking refs and our mirror of its agent refs."""
    known = [theirs for _, _, _, theirs in pushed if theirs != ZERO and repo.exists(theirs)]
    key = remote_key(repo, remote)
    if key == remote:  # a configured remote: its tracking refs
        known.append(f"--remotes={remote}")
    known.append(f"--glob=refs/ckpt-remotes/{key}/*")
    return known


def _binary_limit(repo: GitRepo) -> int:
    raw = repo.config_get("ckpt.scanBinaryLimit") or repo.config_get("ckpt.scanbinarylimit")
    if raw is None:
        return DEFAULT_BINARY_LIMIT
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = raw.strip().lower()
    try:
        if text and text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)
    except ValueError:
        return DEFAULT_BINARY_LIMIT


def _scan(
    obj: OutObject, chunks: Iterator[bytes], r: Redactor, limit: int, result: PushCheck
) -> Iterator[tuple[str, int]]:
    """(rule, line) of each secret in the object, one per rule and line."""
    seen: set[tuple[str, int]] = set()
    tail = b""
    lines_before = 0  # newlines before `tail` (a commit's: counted from its message)
    for i, data in enumerate(chunks):
        if i == 0 and obj.type == "blob" and obj.size > limit and b"\0" in data[:BINARY_SNIFF]:
            result.skipped.append(obj)
            return
        if i == 0 and obj.type != "blob":  # the header: up to the first empty line
            end = data.find(b"\n\n")
            lines_before = -(data[: end + 2].count(b"\n") if end >= 0 else 0)
        result.scanned_bytes += len(data)
        buf = tail + data
        text = buf.decode("utf-8", "replace")
        for rule, offset in r.findings(text):
            hit = (rule, lines_before + text.count("\n", 0, offset) + 1)
            if hit not in seen:
                seen.add(hit)
                yield hit
        keep = buf[-OVERLAP:]
        lines_before += buf[: len(buf) - len(keep)].count(b"\n")
        tail = keep


def _pushed_tasks(pushed: Iterable[PushLine]) -> list[str]:
    """The tasks whose checkpoint or events ref the push moves."""
    tasks = set()
    for _, local, remote_ref, _ in pushed:
        if local == ZERO:
            continue
        for prefix in (CHECKPOINTS, EVENTS):
            if remote_ref.startswith(prefix):
                tasks.add(remote_ref[len(prefix) :])
    return sorted(tasks)
