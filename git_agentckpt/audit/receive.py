"""What a server accepts into its trail: the rules of the `pre-receive` hook.

`git ckpt hooks install --server` puts a shim in the repository's `hooks/pre-receive`
that runs `judge_push` on the updates of each push (git hands them over on stdin as
`old new ref` lines, before any ref moves; the pushed objects are still in a quarantine
directory, which `GitRepo.add_object_dirs_from_env` adds to what is read). For
`refs/agent/**` and `refs/notes/agent/**` it refuses:

- a deletion (`deleted`): the trail is append-only;
- an update that is not a fast-forward (`not-fast-forward`), or a ref that names no
  commit (`not-a-commit`);
- a checkpoint ref whose new commits are not checkpoints of that task
  (`not-a-checkpoint`), or one of whose new checkpoints has no `checkpoint.prepare`
  event in the task's log as the push leaves it (`no-prepare`: the write-ahead order);
- anything `git ckpt verify` rejects in the tasks the push touches (`verify`).

It also refuses a `refs/replace/<id>` ref whose object `<id>` the trail holds, as the
push leaves it (`replaces-trail`): everyone who fetched it would see another record
through plain git (`audit/replaced.py`).

Other refs are never judged: a push of branches alone does not even start Python (the
shim looks first). A pre-receive hook decides for the whole push, so a push that mixes
a refused agent ref with a branch is refused as a whole; the message says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from git_agentckpt.audit.replaced import REPLACE, replaced_id, replaced_in_trail
from git_agentckpt.errors import CkptError, CorruptError, NotFound
from git_agentckpt.git.repo import CommitInfo, GitRepo
from git_agentckpt.store.events import events_of
from git_agentckpt.store.guard import ZERO, Update
from git_agentckpt.store.refs import CHECKPOINTS, EVENTS
from git_agentckpt.trailers import parse_trailers

AGENT_PREFIXES = ("refs/agent/", "refs/notes/agent/")
PREFIX = "git ckpt: "

# What to do about each kind of refusal, said once after the refused refs.
FIXES = {
    "deleted": "the trail on this server is append-only: a ref under refs/agent/ or "
    "refs/notes/agent/ is never deleted",
    "not-fast-forward": "the trail on this server is append-only: run `git ckpt push` "
    "(it fetches, unites the logs and pushes forward only) instead of a forced push",
    "not-a-commit": "push agent refs that name commits written by `git ckpt`",
    "not-a-checkpoint": "a checkpoint ref takes only checkpoint commits of its own task "
    "(written by `git ckpt create`)",
    "no-prepare": "push a checkpoint together with its task's event log in one atomic "
    "push (`git ckpt push` does); a commit written outside `git ckpt create` has no "
    "checkpoint.prepare event and cannot become a checkpoint",
    "replaces-trail": "the trail on this server is append-only: a refs/replace/ ref never "
    "stands in for one of its records (`git replace -d` it in your clone)",
    "verify": "run `git ckpt verify` in your clone: it names each problem; repair the "
    "trail (or start the task again) before pushing",
}


@dataclass(frozen=True)
class Refusal:
    ref: str
    rule: str  # a key of FIXES
    reason: str

    def line(self) -> str:
        return f"{PREFIX}refused {self.ref}: {self.reason}"


# A verifier: the trail's problems, (task or None, one line) each, with the push's new
# values of the refs it touches (`hooks.verify_pushed` is the one the hook uses).
Verifier = Callable[[GitRepo, list[Update]], list[tuple[str | None, str]]]


def agent_updates(updates: Iterable[Update]) -> list[Update]:
    return [u for u in updates if u.ref.startswith(AGENT_PREFIXES)]


def judged_updates(updates: Iterable[Update]) -> list[Update]:
    """The updates the hook judges: agent refs, and replacements (new or moved)."""
    return [u for u in updates if u.ref.startswith(AGENT_PREFIXES) or _replacing(u)]


def _replacing(u: Update) -> bool:
    return u.ref.startswith(REPLACE) and u.new != ZERO


def judge_push(repo: GitRepo, updates: list[Update], verify: Verifier | None) -> list[Refusal]:
    """Why the push must be refused (empty: accepted). Only agent refs and replacements
    are judged."""
    agent = agent_updates(updates)
    new_tips = {u.ref: u.new for u in agent}
    refusals = _judge_replacements(repo, [u for u in updates if _replacing(u)], new_tips)
    for u in agent:
        refusals.extend(_judge_ref(repo, u, new_tips))
    if verify is not None and agent and not refusals:
        refusals.extend(
            Refusal(_ref_of(task, agent), "verify", line) for task, line in verify(repo, agent)
        )
    return refusals


def _judge_replacements(
    repo: GitRepo, replacing: list[Update], new_tips: dict[str, str]
) -> list[Refusal]:
    """The pushed `refs/replace/<id>` refs whose object the trail holds as the push
    leaves it (its agent refs here, moved to `new_tips`)."""
    by_id = {oid: u for u in replacing if (oid := replaced_id(u.ref)) is not None}
    if not by_id:
        return []
    trail = {**{r: v for p in AGENT_PREFIXES for r, v in repo.list_refs(p).items()}, **new_tips}
    found = replaced_in_trail(repo, {r: v for r, v in trail.items() if v != ZERO}, by_id)
    return [
        Refusal(
            by_id[oid].ref,
            "replaces-trail",
            f"it would make plain git show {by_id[oid].new[:12]} instead of the trail's "
            f"{kind} {oid[:12]}",
        )
        for oid, kind in sorted(found.items())
    ]


def _ref_of(task: str | None, agent: list[Update]) -> str:
    """The pushed ref a verify problem is about: its task's checkpoint or events ref."""
    for u in agent:
        if task is not None and u.ref in (CHECKPOINTS + task, EVENTS + task):
            return u.ref
    return f"the trail of task {task}" if task else "the trail"


def _judge_ref(repo: GitRepo, u: Update, new_tips: dict[str, str]) -> list[Refusal]:
    if u.new == ZERO:
        return [Refusal(u.ref, "deleted", "audit refs are never deleted")]
    try:
        repo.read_commit(u.new)
    except (NotFound, CorruptError):
        return [Refusal(u.ref, "not-a-commit", f"{u.new[:12]} is not a commit")]
    if u.old != ZERO and not repo.is_ancestor(u.old, u.new):
        return [
            Refusal(
                u.ref,
                "not-fast-forward",
                f"not a fast-forward ({u.old[:12]} is not an ancestor of {u.new[:12]}): "
                "the history here would be rewritten",
            )
        ]
    if u.ref.startswith(CHECKPOINTS):
        return _judge_checkpoints(repo, u, new_tips)
    return []


def _judge_checkpoints(repo: GitRepo, u: Update, new_tips: dict[str, str]) -> list[Refusal]:
    """Every checkpoint the push adds to the chain is a checkpoint of this task with its
    `checkpoint.prepare` in the task's event log (its pushed value, or the one here)."""
    task = u.ref[len(CHECKPOINTS) :]
    events_ref = EVENTS + task
    events_tip = new_tips.get(events_ref) or repo.read_ref(events_ref)
    try:
        added = _added_checkpoints(repo, task, u)
    except _NotCheckpoint as exc:
        return [Refusal(u.ref, "not-a-checkpoint", str(exc))]
    if not added:
        return []
    try:
        prepared = prepared_checkpoints(repo, events_tip)
    except CkptError as exc:
        return [Refusal(u.ref, "no-prepare", f"cannot read {events_ref}: {exc.one_line()}")]
    missing = [c for c in added if c.id not in prepared]
    if not missing:
        return []
    shown = ", ".join(c.id[:12] for c in missing[:3]) + (
        f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    )
    where = "as pushed" if events_ref in new_tips else "on this server (not in this push)"
    return [
        Refusal(
            u.ref,
            "no-prepare",
            f"no checkpoint.prepare event for {shown} in {events_ref} {where} (write-ahead order)",
        )
    ]


class _NotCheckpoint(Exception):
    pass


def _added_checkpoints(repo: GitRepo, task: str, u: Update) -> list[CommitInfo]:
    """The checkpoints the push adds: first parents from the new tip back to the old one
    (a first push: down to the baseline, the first commit that is no checkpoint)."""
    added: list[CommitInfo] = []
    for info in repo.walk(u.new):
        if info.id == u.old:
            break
        trailers = parse_trailers(info.message)
        if "Checkpoint-Id" not in trailers:
            if not added:
                raise _NotCheckpoint(f"{info.id[:12]} is not a checkpoint commit")
            break  # the baseline: the user's commit the task began from
        if trailers.get("Task") != task:
            raise _NotCheckpoint(
                f"{info.id[:12]} is a checkpoint of task {trailers.get('Task')!r}, not of {task!r}"
            )
        added.append(info)
    return added


def prepared_checkpoints(repo: GitRepo, events_tip: str | None) -> set[str]:
    """The commits a `checkpoint.prepare` names in the log at `events_tip` (its whole
    first-parent chain; only messages that mention the event type are parsed)."""
    if events_tip is None or events_tip == ZERO:
        return set()
    found: set[str] = set()
    for info in repo.walk(events_tip):
        if "checkpoint.prepare" not in info.message:
            continue
        for ev in events_of(info):
            target = ev.links.get("checkpoint")
            if ev.type == "checkpoint.prepare" and isinstance(target, str):
                found.add(target)
    return found


def refusal_lines(refusals: list[Refusal], others: int) -> list[str]:
    """What the pushing client reads, every line prefixed `git ckpt: ` (git adds `remote: `):
    the refused refs, what was changed (nothing), and what to do about each kind."""
    lines = [r.line() for r in refusals]
    whole = (
        f"; the {others} other ref(s) of this push were refused with it (a pre-receive hook "
        "decides for the whole push): push them on their own"
        if others
        else ""
    )
    lines.append(f"{PREFIX}push refused: nothing was changed on this server{whole}")
    for rule in dict.fromkeys(r.rule for r in refusals):
        lines.append(f"{PREFIX}fix: {FIXES[rule]}")
    return lines
