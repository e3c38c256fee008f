"""The trail only grows: compared with copies kept elsewhere.

Three sources of "what this ref held before": the mirrors of the last fetch
(`refs/ckpt-remotes/<remote>/…`, inside the store), the remote itself
(`--against REMOTE`, read with `git ls-remote`) and the witness file written
by `push` (outside the repository). Each tip they hold must still be
contained in the local ref. Only the last two can see a store rolled back as
a whole, mirrors and all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from git_agentckpt.audit.problems import Problem, Severity
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON
from git_agentckpt.store.refs import CHECKPOINTS, EVENTS, REPORTS
from git_agentckpt.store.share import MIRROR

AUDITED = ("refs/agent/", "refs/notes/agent/")


def task_of(ref: str) -> str | None:
    for prefix in (CHECKPOINTS, EVENTS, REPORTS):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return None


def mirrored_tips(repo: GitRepo) -> dict[str, dict[str, str]]:
    """{mirror name: {audited ref: tip}} from `refs/ckpt-remotes/<name>/…`."""
    out: dict[str, dict[str, str]] = {}
    for name, tip in repo.list_refs(MIRROR).items():
        key, _, rest = name[len(MIRROR) :].partition("/")
        ref = "refs/" + rest
        if ref.startswith(AUDITED):
            out.setdefault(key, {})[ref] = tip
    return out


def compare(
    repo: GitRepo,
    local: Callable[[str], str | None],
    expected: Mapping[str, str],
    source: str,
    *,
    keep: Callable[[str | None], bool],
    diverge_ok: bool,
    behind_hint: bool = False,
) -> list[Problem]:
    """Problems where a local ref does not contain what `source` says it held."""
    out: list[Problem] = []
    for ref, tip in sorted(expected.items()):
        task = task_of(ref)
        if not ref.startswith(AUDITED) or not keep(task):
            continue
        mine = local(ref)
        if mine == tip:
            continue
        stored = repo.exists(tip)
        if mine is not None and stored and repo.is_ancestor(tip, mine):
            continue
        if mine is None:
            detail = f"the ref is gone; {source} had it at {tip[:12]}"
        else:
            diverged = stored and not repo.is_ancestor(mine, tip)
            if diverged and ref.startswith(CHECKPOINTS):
                sev: Severity = "warning" if diverge_ok else "error"
                text = f"{source} has {tip[:12]}, which is not in this chain (two clones wrote it)"
                out.append(Problem(task, "diverged", ref, text, sev))
                continue
            lacks = "is not stored here" if not stored else f"is not contained in {mine[:12]}"
            detail = f"{source} had {tip[:12]}, which {lacks}"
        if not stored and behind_hint:  # a remote may just be ahead of us
            detail += ": this store was rolled back, or is behind (`git ckpt fetch` brings it)"
        else:
            detail += ": history was lost or rewritten"
        out.append(Problem(task, "rolled-back", ref, detail))
    return out


def compare_seq(
    witnessed: Mapping[str, dict[str, JSON]], last_seq: Mapping[str, int], source: str
) -> list[Problem]:
    """Event logs whose highest event number is below what `source` recorded."""
    out: list[Problem] = []
    for ref, entry in sorted(witnessed.items()):
        task = task_of(ref)
        seq = entry.get("seq")
        if task is None or task not in last_seq or not isinstance(seq, int):
            continue
        if last_seq[task] < seq:
            out.append(
                Problem(
                    task,
                    "rolled-back",
                    ref,
                    f"{source} recorded event #{seq}, the log ends at #{last_seq[task]}",
                )
            )
    return out
