"""`refs/replace/*` over the trail: what plain git would show instead of a record.

`git replace X Y` makes git show object Y wherever X is asked for (`git log`, `show`,
`cat-file`, a checkout), and a push of `refs/replace/*` hands that view to everyone who
fetches it. `git ckpt` never sees it: every git it runs gets `GIT_NO_REPLACE_OBJECTS=1`
(`git/run.py`) and libgit2 applies no replacements. A person or a script reading the
trail with plain git would, so `verify` names each replacement of an object the trail
holds (`replaced-object`) and the server's pre-receive hook refuses to take one.

The trail's objects: everything reachable from `refs/agent/*`, `refs/notes/agent/*` and
the fetch mirrors, except what the commits the tasks began from (`Baseline`) reach: the
user's own history is the user's, however a replacement shows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from git_agentckpt.audit.problems import Problem
from git_agentckpt.audit.remote_check import AUDITED
from git_agentckpt.errors import CkptError
from git_agentckpt.git.outgoing import objects_to_send
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store.share import MIRROR
from git_agentckpt.trailers import parse_trailers

REPLACE = "refs/replace/"
TRAIL = (*AUDITED, MIRROR)  # the refs whose objects are the trail's
_OID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?\Z")
_CHAINS = "agent/checkpoints/"  # in a task's ref and in a mirror's copy of it


def replaced_id(ref: str) -> str | None:
    """The object a `refs/replace/<id>` ref stands in for (None: no such ref name)."""
    name = ref[len(REPLACE) :] if ref.startswith(REPLACE) else ""
    return name if _OID.match(name) else None


def replaced_in_trail(
    repo: GitRepo, trail: Mapping[str, str], replaced: Iterable[str]
) -> dict[str, str]:
    """{id: its type} of the objects among `replaced` that the trail holds, `trail` being
    its refs ({ref: tip}). One `git rev-list --objects` over the trail."""
    wanted = set(replaced)
    if not wanted or not trail:
        return {}
    baselines = {_baseline(repo, tip) for ref, tip in trail.items() if _CHAINS in ref}
    objects = objects_to_send(repo, sorted(set(trail.values())), sorted(baselines - {""}))
    return {o.id: o.type for o in objects if o.id in wanted}


def _baseline(repo: GitRepo, tip: str) -> str:
    """The commit a checkpoint's task began from ("" when it names none we hold)."""
    try:
        base = parse_trailers(repo.read_commit(tip).message).get("Baseline", "")
    except CkptError:  # not a commit: `verify` names it
        return ""
    return base if _OID.match(base) and repo.exists(base) else ""


def replacement_problems(
    repo: GitRepo, trail: Mapping[str, str], replacements: Mapping[str, str]
) -> list[Problem]:
    """One `replaced-object` error per `refs/replace/*` ref ({ref: replacement}) that
    stands in for an object of the trail."""
    by_id = {oid: ref for ref in replacements if (oid := replaced_id(ref)) is not None}
    try:
        found = replaced_in_trail(repo, trail, by_id)
    except CkptError as exc:  # a trail with missing objects: named by the other checks
        detail = f"cannot tell whether they replace records of the trail: {exc.one_line()}"
        return [Problem(None, "unreadable", REPLACE, detail)]
    return [_problem(by_id[oid], replacements[by_id[oid]], kind) for oid, kind in found.items()]


def _problem(ref: str, replacement: str, kind: str) -> Problem:
    short = ref[len(REPLACE) :][:12]
    detail = (
        f"plain git shows {replacement[:12]} instead of the trail's {kind} {short}; git ckpt "
        f"reads the original (`git --no-replace-objects show {short}`); remove the "
        f"replacement with `git replace -d {short}`"
    )
    return Problem(None, "replaced-object", ref, detail)
