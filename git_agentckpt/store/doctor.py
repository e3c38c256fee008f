"""`git ckpt doctor`: remove what killed writers left in the git directory, when it is safe.

A `*.lock` file left by a killed `git fetch` (under `refs/ckpt-remotes/`), a
killed libgit2 or git ckpt writer, or a killed `git add` on the private index
blocks every later update of that file. A file is removed only when its owner
is provably gone, and each decision is reported with its reason:

1. `/proc` can be read (Linux); elsewhere nothing can be proven and all is kept;
2. no live process has the file open;
3. it is older than `MIN_AGE` seconds (a writer that is slow to open it);
4. no git process runs in the repository (git closes a lock file after writing it
   and keeps it until the rename, e.g. while a reference-transaction hook runs);
5. no process of the file's owner is hidden from us (another user's processes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from git_agentckpt.git.leftovers import (
    GONE,
    age_text,
    find_left_files,
    remove_if_unchanged,
    scan_processes,
    why_kept,
)
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON

MIN_AGE = 10.0  # seconds
REMOVED = "removed"
WOULD_REMOVE = "would remove"
KEPT = "kept"


@dataclass(frozen=True)
class Finding:
    path: str  # absolute
    kind: str  # lock | temporary object file
    age: float
    size: int
    action: str  # removed | would remove | kept
    reason: str

    def to_json(self) -> dict[str, JSON]:
        return {
            "path": self.path,
            "kind": self.kind,
            "age_seconds": round(self.age, 1),
            "size": self.size,
            "action": self.action,
            "reason": self.reason,
        }


@dataclass
class DoctorReport:
    git_dir: str
    dry_run: bool
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing was found, or everything found was removed."""
        return all(f.action == REMOVED for f in self.findings)

    def to_json(self) -> dict[str, JSON]:
        return {
            "git_dir": self.git_dir,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "removed": sum(f.action == REMOVED for f in self.findings),
            "kept": sum(f.action == KEPT for f in self.findings),
            "findings": [f.to_json() for f in self.findings],
        }


def doctor(repo: GitRepo, dry_run: bool = False, min_age: float = MIN_AGE) -> DoctorReport:
    """Find lock and temporary files left by killed writers; remove the provably stale."""
    report = DoctorReport(repo.common_dir, dry_run)
    left = find_left_files(repo)
    if not left:
        return report
    scan = scan_processes(repo, left)
    for item in left:
        reason = why_kept(item, scan, min_age)
        action = KEPT
        if reason is None:
            stale = (
                f"no process has it open and no git command runs here; "
                f"last changed {age_text(item.age)} ago"
            )
            if dry_run:
                action, reason = WOULD_REMOVE, stale
            else:
                failed = remove_if_unchanged(item)
                if failed == GONE:
                    continue  # its writer finished: nothing is wrong any more
                action, reason = (REMOVED, stale) if failed is None else (KEPT, failed)
        report.findings.append(Finding(item.path, item.kind, item.age, item.size, action, reason))
    return report
