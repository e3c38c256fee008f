"""Notes of each checkpoint: stored intact, parse, of a known version and schema, of the
checkpoint's own task, and the very blobs its `checkpoint.prepare` event named (trails
written since `verify` exists; older prepares name none, and only the task is compared).
A prepare that binds notes and names no assertions note binds its absence: one found
there was added after the fact. The state notes of checkpoints no chain holds name the
tasks they belong to (`orphan_tasks`): a task deleted as a whole still shows there."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

from git_agentckpt.audit.chain_check import ChainWalk, Link
from git_agentckpt.audit.per_commit import CommitContext
from git_agentckpt.audit.problems import read_error_kind
from git_agentckpt.errors import CkptError
from git_agentckpt.git.audit_read import blob_state, read_raw_commit
from git_agentckpt.git.notes import note_id_at
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.tree_check import TREE
from git_agentckpt.model import JSON, check_version, normalize_state
from git_agentckpt.trailers import parse_trailers


def _load(
    walk: ChainWalk, ctx: CommitContext, top: str | None, link: Link, what: str
) -> tuple[str | None, dict[str, JSON] | None]:
    """(blob id, parsed object) of a note; problems reported, (None, None) when absent."""
    c = link.commit
    if top is None:
        return None, None
    try:
        blob = note_id_at(ctx.repo, top, c.id)
    except Exception as exc:  # a damaged notes tree: this note only (libgit2's errors too)
        walk.problem("unreadable", c.id, f"the {what} notes tree cannot be read: {exc}")
        return None, None
    if blob is None:
        return None, None
    data, why = blob_state(ctx.repo, blob)
    if data is None:
        kind = read_error_kind(why or "")
        walk.problem(kind, c.id, f"the {what} note {blob[:12]}: {why}")
        return blob, None
    try:
        obj = json.loads(data.decode("utf-8"))
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        check_version(obj, f"the {what} note")
    except (ValueError, RecursionError) as exc:
        walk.problem("note-invalid", c.id, f"the {what} note is not valid JSON: {str(exc)[:80]}")
        return blob, None
    except CkptError as exc:
        walk.problem("note-invalid", c.id, exc.message)
        return blob, None
    return blob, obj


def _named(prepare: dict[str, JSON] | None, key: str) -> str | None:
    notes = (prepare or {}).get("notes")
    value = notes.get(key) if isinstance(notes, dict) else None
    return value if isinstance(value, str) else None


def check_notes(
    ctx: CommitContext,
    walk: ChainWalk,
    prepare_data: dict[str, dict[str, JSON]],
    state_top: str | None,
    assertions_top: str | None,
) -> dict[str, list[str]]:
    """Check every checkpoint's notes; returns checkpoint commit -> the steps marked done."""
    done: dict[str, list[str]] = {}
    for link in walk.links:
        c = link.commit
        prepare = prepare_data.get(c.id)
        blob, state = _load(walk, ctx, state_top, link, "state")
        if blob is None:
            walk.problem("note-missing", c.id, f"checkpoint {link.number} has no state note")
        _compare(walk, link, blob, _named(prepare, "state"), "state")
        if state is not None:
            _check_state(walk, link, state)
            steps = state.get("steps")
            done[c.id] = [
                str(s.get("id"))
                for s in (steps if isinstance(steps, list) else [])
                if isinstance(s, dict) and s.get("status") == "done"
            ]
        a_blob, assertions = _load(walk, ctx, assertions_top, link, "assertions")
        _check_assertions_bound(walk, link, a_blob, prepare)
        if assertions is not None and not isinstance(assertions.get("assertions", []), list):
            walk.problem("note-invalid", c.id, "the assertions note's 'assertions' is not a list")
    return done


def _check_assertions_bound(
    walk: ChainWalk, link: Link, blob: str | None, prepare: dict[str, JSON] | None
) -> None:
    """The assertions note is the one the prepare bound: gone, replaced, or added where a
    prepare that binds notes named none."""
    named = _named(prepare, "assertions")
    if named is not None and blob is None:
        detail = f"checkpoint {link.number}'s assertions note is gone"
        walk.problem("note-missing", link.commit.id, detail)
    elif blob is not None and named is None and isinstance((prepare or {}).get("notes"), dict):
        walk.problem(
            "note-added",
            link.commit.id,
            f"checkpoint {link.number} has an assertions note {blob[:12]}, but its prepare "
            "event bound none: the note was added after the fact (git notes add?)",
        )
    else:
        _compare(walk, link, blob, named, "assertions")


def _compare(walk: ChainWalk, link: Link, blob: str | None, named: str | None, what: str) -> None:
    if blob is not None and named is not None and blob != named:
        walk.problem(
            "note-replaced",
            link.commit.id,
            f"the {what} note of checkpoint {link.number} is {blob[:12]}, its prepare event "
            f"named {named[:12]}: the note was replaced after the fact (git notes add -f?)",
        )


def _check_state(walk: ChainWalk, link: Link, state: dict[str, JSON]) -> None:
    c = link.commit
    if state.get("task") != walk.task:
        walk.problem(
            "note-misplaced",
            c.id,
            f"the state note of checkpoint {link.number} is task {state.get('task')!r}'s "
            "(copied from another task)",
        )
    try:
        normalize_state(copy.deepcopy(state))
    except CkptError as exc:
        walk.problem("note-invalid", c.id, f"the state note fails its schema: {exc.message}")


def orphan_tasks(repo: GitRepo, top: str | None, covered: set[str]) -> dict[str, int]:
    """{task: how many state notes in the notes tree `top` annotate checkpoints of it that
    are not in `covered` (the chains walked)}; commits not stored are not counted."""
    found: dict[str, int] = {}
    for target in _annotated(repo, top, "") if top is not None else ():
        if target in covered:
            continue
        commit = read_raw_commit(repo, target)
        trailers = parse_trailers(commit.message) if commit.error is None else {}
        task = trailers.get("Task")
        if task and "Checkpoint-Id" in trailers:
            found[task] = found.get(task, 0) + 1
    return found


def _annotated(repo: GitRepo, tree: str, prefix: str) -> Iterator[str]:
    """The objects a notes tree annotates, at any fan-out depth."""
    for name, (oid, mode) in repo.tree_entries(tree).items():
        if mode == TREE:
            yield from _annotated(repo, oid, prefix + name)
        else:
            yield prefix + name
