"""Sharing the audit trail with other clones through any git remote (design section 6).

`fetch` copies the remote's `refs/agent/*` and `refs/notes/agent/*` into a
mirror, `refs/ckpt-remotes/<remote>/…` (never pushed, force-updated, and set to
what `push` sent once the remote accepted it: it only
says what the remote had), then brings each into our refs without losing
either side, in write-ahead order:

1. event logs: created, fast-forwarded, or united (`EventLog.union_commit`: a merge
   commit that holds their events our chain lacks, by id);
2. notes (state, assertions) and recovery reports: created, fast-forwarded,
   or merged by a union of their trees (entries on one side only are added;
   where both sides hold different content, ours is kept and counted);
3. checkpoint refs, last, so their `checkpoint.prepare` events are already
   here: created or fast-forwarded through the same guard as every checkpoint
   move. Two chains of one task that diverged cannot be united (each commit
   is a snapshot): ours stays, theirs stays in the mirror, and it is reported.

`push` fetches and merges first, then pushes every agent ref (all but the
diverged checkpoint refs) in one `git push --atomic`, fast-forward only, so
each remote ref moves only from the value we merged: if another clone pushed
in between, the push is refused as a whole and we fetch, merge and try again.

A damaged ref of this clone (at an object that is not stored or not a commit, an
event log whose tip is malformed, a checkpoint ref at no checkpoint) is named
`damaged` (`local`), neither merged into nor pushed: the rest is shared. git runs
with `GIT_REF_PARANOIA=0` (`transport.py`), so such a ref no longer fails every
fetch and push ("did not send all necessary objects").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import (
    BadTaskName,
    ConflictError,
    CorruptError,
    NotFound,
    RepositoryError,
)
from git_agentckpt.git.ref_moves import retry_cas
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.transport import PushedRef, fetch_into, push_refs, remote_key
from git_agentckpt.model import JSON
from git_agentckpt.progress import GitMeters
from git_agentckpt.progress import enabled as progress_enabled
from git_agentckpt.retry import retry
from git_agentckpt.store.checkpoints import parse_checkpoint
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.guard import ZERO, Update, check_updates
from git_agentckpt.store.refs import CHECKPOINTS, EVENTS, REPORTS, TaskName

MIRROR = "refs/ckpt-remotes/"
NOTES = "refs/notes/agent/"
_TREE = 0o040000
PUSH_TRIES = 5


@dataclass(frozen=True)
class RefResult:
    ref: str
    # created | fast-forward | merged | up to date | diverged | refused | damaged | skipped
    action: str
    detail: str = ""
    local: bool = False  # damaged here, in this clone (not in what the remote sent)

    @property
    def blocked(self) -> bool:
        """Ours and theirs stay apart: the ref cannot be pushed."""
        return self.action in ("diverged", "refused", "damaged")

    @property
    def holds_task(self) -> bool:
        """An event log: when it is blocked, its task's other refs wait with it."""
        return self.ref.startswith(EVENTS)

    def to_json(self) -> dict[str, JSON]:
        return {"ref": self.ref, "action": self.action, "detail": self.detail, "local": self.local}


@dataclass
class ShareResult:
    remote: str
    mirror: str
    fetched: list[RefResult] = field(default_factory=list)
    pushed: list[PushedRef] = field(default_factory=list)
    attempts: int = 0

    @property
    def blocked(self) -> list[RefResult]:
        return [r for r in self.fetched if r.blocked]

    def held_back(self) -> set[str]:
        """The refs a push leaves out: the blocked ones and, with a task's blocked event
        log, its checkpoint and report refs (a checkpoint never lands without its log)."""
        held = {r.ref for r in self.blocked}
        for r in self.blocked:
            if r.holds_task:
                held |= {CHECKPOINTS + r.ref[len(EVENTS) :], REPORTS + r.ref[len(EVENTS) :]}
        return held

    def to_json(self) -> dict[str, JSON]:
        return {
            "remote": self.remote,
            "mirror": self.mirror,
            "fetched": [r.to_json() for r in self.fetched],
            "pushed": [{"ref": p.ref, "flag": p.flag, "summary": p.summary} for p in self.pushed],
            "blocked": [r.ref for r in self.blocked],
            "attempts": self.attempts,
        }


def _order(ref: str) -> int:
    """Write-ahead order: event logs, then notes and reports, then checkpoint refs."""
    if ref.startswith(EVENTS):
        return 0
    if ref.startswith(CHECKPOINTS):
        return 2
    return 1


def fetch(repo: GitRepo, log: EventLog, remote: str) -> ShareResult:
    key = remote_key(repo, remote)
    mirror = f"{MIRROR}{key}/"
    specs = [("refs/agent/*", mirror + "agent/*"), (NOTES + "*", mirror + "notes/agent/*")]
    fetch_into(repo, remote, specs, GitMeters() if progress_enabled() else None)
    crash_point("fetch.mirrored")
    result = ShareResult(remote, mirror)
    theirs = {"refs/" + name[len(mirror) :]: tip for name, tip in repo.list_refs(mirror).items()}
    ours = {**repo.list_refs("refs/agent/"), **repo.list_refs(NOTES)}
    here = {
        r.ref: r for r in (_damaged_here(repo, log, ref, tip) for ref, tip in ours.items()) if r
    }
    # the remote as commit and reflog messages name it: a URL may carry a password
    shown = log.redactor.text(remote)
    for ref in sorted(theirs.keys() | here.keys(), key=lambda r: (_order(r), r)):
        if ref in here:
            result.fetched.append(here[ref])
        else:
            result.fetched.append(_integrate(repo, log, ref, theirs[ref], shown, mirror))
    return result


def _damaged_here(repo: GitRepo, log: EventLog, ref: str, tip: str) -> RefResult | None:
    """`ref` of this clone as `damaged` (`local`) when its tip cannot be shared: not
    stored, not a commit, an event log whose last commit is malformed, a checkpoint
    ref at no checkpoint (None: it can be)."""
    try:
        info = repo.read_commit(tip)
        if ref.startswith(EVENTS):
            log.last_seq_at(tip)
        elif ref.startswith(CHECKPOINTS) and parse_checkpoint(info) is None:
            raise CorruptError(f"{tip[:12]} is not a checkpoint commit")
    except NotFound:
        why = f"points at {tip[:12]}, which is not a commit stored here"
        return RefResult(ref, "damaged", why, local=True)
    except CorruptError as exc:
        return RefResult(ref, "damaged", exc.one_line(), local=True)
    return None


def _integrate(
    repo: GitRepo, log: EventLog, ref: str, tip: str, remote: str, mirror: str
) -> RefResult:
    try:
        if ref.startswith(EVENTS):
            return _merge_events(repo, log, TaskName.from_ref(ref), tip, remote)
        if ref.startswith(CHECKPOINTS):
            TaskName.from_ref(ref)
            return _fast_forward_checkpoint(repo, ref, tip, mirror)
        if ref.startswith((NOTES, REPORTS)):
            if ref.startswith(REPORTS):
                TaskName.from_ref(ref)
            return _merge_history(repo, ref, tip, remote)
    except BadTaskName as exc:
        return RefResult(ref, "skipped", exc.one_line())
    except RepositoryError as exc:  # e.g. task `a` here and `a/b` there: git cannot hold both
        return RefResult(ref, "refused", exc.one_line())
    except (CorruptError, NotFound) as exc:  # their record is damaged: only this ref waits
        return RefResult(ref, "damaged", exc.one_line())
    return RefResult(ref, "skipped", "not an agent ref this version knows")


def _union_trees(repo: GitRepo, ours: str, theirs: str) -> tuple[str, int]:
    """Every entry of both trees; where both differ (and are not both trees) ours wins."""
    if ours == theirs:
        return ours, 0
    mine = repo.tree_entries(ours)
    add: dict[str, tuple[str, int]] = {}
    conflicts = 0
    for name, (oid, mode) in repo.tree_entries(theirs).items():
        have = mine.get(name)
        if have is None:
            add[name] = (oid, mode)
        elif have == (oid, mode):
            continue
        elif have[1] == _TREE and mode == _TREE:
            sub, more = _union_trees(repo, have[0], oid)
            conflicts += more
            if sub != have[0]:
                add[name] = (sub, _TREE)
        else:
            conflicts += 1
    return (repo.write_tree(add, base=ours) if add else ours), conflicts


def _bring_in(
    repo: GitRepo,
    ref: str,
    tip: str,
    origin: str,
    diverged: Callable[[str], tuple[str | None, str, str]],
    guarded: bool = False,
    forward_detail: Callable[[str | None], str] = lambda _: "",
) -> RefResult:
    """Move `ref` to `tip` when that is forward (creating it if missing; the detail is
    `forward_detail(ours)`); when the two diverged, `diverged(ours)` gives (new commit
    or None to leave ours, action, detail). Every move is a compare-and-swap from the
    value just read."""
    out: list[RefResult] = []

    def attempt() -> str | None:
        old = repo.read_ref(ref)
        if old is not None and repo.is_ancestor(tip, old):
            out[:] = [RefResult(ref, "up to date")]
            return old
        if old is None or repo.is_ancestor(old, tip):
            new: str | None = tip
            action, detail = ("created" if old is None else "fast-forward"), forward_detail(old)
            problems = check_updates(repo, [Update(old or ZERO, tip, ref)]) if guarded else []
            if problems:
                new, action, detail = None, "refused", problems[0]
        else:
            new, action, detail = diverged(old)
        out[:] = [RefResult(ref, action, detail)]
        if new is None:
            return old or ZERO
        return new if repo.cas_ref(ref, new, old, f"git ckpt: {action} from {origin}") else None

    retry_cas(attempt, f"updating {ref}")
    return out[0]


def _merge_events(repo: GitRepo, log: EventLog, task: TaskName, tip: str, remote: str) -> RefResult:
    """Event logs: create, fast-forward, or unite (`EventLog.union_commit`)."""

    def counted(n: int) -> str:
        return f"{n} event(s)" if n else ""

    def unite(ours: str) -> tuple[str | None, str, str]:
        commit, gained = log.union_commit(task, ours, tip, remote)
        return commit, "merged", counted(gained)

    def forward(ours: str | None) -> str:
        return counted(len(log.since(tip, ours)))

    return _bring_in(repo, task.events_ref, tip, remote, unite, forward_detail=forward)


def _merge_history(repo: GitRepo, ref: str, tip: str, remote: str) -> RefResult:
    """Notes and reports: create, fast-forward, or merge by the union of the trees."""

    def union(ours: str) -> tuple[str | None, str, str]:
        tree, conflicts = _union_trees(
            repo, repo.read_commit(ours).tree, repo.read_commit(tip).tree
        )
        detail = f"{conflicts} entries held different content: kept ours" if conflicts else ""
        message = f"git ckpt: merge {ref} from {remote}\n" + (f"\n{detail}\n" if detail else "")
        return repo.commit(tree, [ours, tip], message), "merged", detail

    return _bring_in(repo, ref, tip, remote, union)


def _fast_forward_checkpoint(repo: GitRepo, ref: str, tip: str, mirror: str) -> RefResult:
    """Checkpoint refs: created or fast-forwarded through the guard; never merged."""
    crash_point("fetch.integrated")

    def keep_ours(_: str) -> tuple[str | None, str, str]:
        return None, "diverged", f"kept ours; theirs stays at {mirror}{ref[len('refs/') :]}"

    return _bring_in(repo, ref, tip, mirror, keep_ours, guarded=True)


def push(
    repo: GitRepo, log: EventLog, remote: str, scan: Callable[[list[str]], None]
) -> ShareResult:
    """Fetch and merge, then push every agent ref that is not blocked, atomically; `scan`
    sees the refs first (and raises to send nothing: the secret scan)."""
    attempts = 0

    def attempt() -> ShareResult | None:
        nonlocal attempts
        attempts += 1
        result = fetch(repo, log, remote)
        result.attempts = attempts
        held = result.held_back()
        refs = sorted(
            r for r in {**repo.list_refs("refs/agent/"), **repo.list_refs(NOTES)} if r not in held
        )
        if not refs:
            return result
        crash_point("push.merged")
        scan(refs)
        result.pushed = push_refs(repo, remote, refs, GitMeters() if progress_enabled() else None)
        if any(p.rejected for p in result.pushed):
            return None
        _mirror_pushed(repo, result.mirror, result.pushed)
        return result

    return retry(
        attempt,
        what=f"pushing to {remote}",
        tries=PUSH_TRIES,
        first_delay=0.05,
        max_delay=1.0,
        exhausted=lambda: ConflictError(
            f"{remote} kept moving: {PUSH_TRIES} pushes were refused after a fresh fetch and merge",
            hint="nothing was lost; run `git ckpt push` again",
        ),
    )


def _mirror_pushed(repo: GitRepo, mirror: str, pushed: list[PushedRef]) -> None:
    """After an accepted push the remote holds what we pushed: the mirror says so too, so
    `verify` compares the trail with the copy last pushed as well as the one last fetched."""
    for p in pushed:
        tip = repo.read_ref(p.ref)
        if tip is not None:
            repo.update_ref(mirror + p.ref[len("refs/") :], "git ckpt: pushed", _to(tip))


def _to(tip: str) -> Callable[[str | None], str]:
    return lambda _: tip
