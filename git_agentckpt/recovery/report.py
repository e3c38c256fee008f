"""Recovery reports, stored in git next to the event log: `refs/agent/reports/<task>`.

One commit per write; the tip's tree holds a directory per report
(`<report-id>/report.json`, `report.md`, `brief.md`, and once confirmed
`restatement.md`), so `git show refs/agent/reports/<task>:<id>/report.md`
prints one. The ref only moves forward, by compare-and-swap.

Reports are bound like notes: the event logged with each write names the blob of
every file written (`data.report_files`, `report_binding`), and a confirm, which
rewrites the report it read, also names what it read (`data.report_read`), so
`verify` finds a report edited later (`audit/reports_check.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from git_agentckpt.errors import CorruptError, NotFound
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON, dumps
from git_agentckpt.paths import escape_lone_bytes, json_safe
from git_agentckpt.redact import Redactor
from git_agentckpt.store.checkpoints import Compute, blob_id
from git_agentckpt.store.refs import TaskName

_BLOB = 0o100644
_TREE = 0o040000


def save_report(
    repo: GitRepo, task: TaskName, report_id: str, files: Mapping[str, bytes], message: str
) -> str:
    """Add or update files of one report directory; returns the reports commit.

    `files` come from `report_files`, which redacts them (store/redaction.py).
    """
    return repo.update_ref(
        task.reports_ref,
        message.splitlines()[0],
        lambda old: report_commit(repo, old, report_id, files, message),
    )


def report_write(
    repo: GitRepo, task: TaskName, report_id: str, files: Mapping[str, bytes], message: str
) -> tuple[dict[str, JSON], dict[str, Compute]]:
    """The event data that binds a write of `files` to report `report_id`, and the move of
    the reports ref that makes it (in the transaction of the event that holds the data)."""
    like = repo.empty_tree()  # the repository's object id length
    bound: dict[str, JSON] = {name: blob_id(data, like) for name, data in files.items()}
    refs: dict[str, Compute] = {
        task.reports_ref: lambda old: report_commit(repo, old, report_id, files, message)
    }
    return {"report_files": bound}, refs


def stored_blobs(repo: GitRepo, task: TaskName, report_id: str) -> dict[str, JSON]:
    """{file: blob id} of report `report_id` as the reports ref holds it."""
    dirs = _report_dirs(repo, task)
    if report_id not in dirs:
        return {}
    return {name: oid for name, (oid, _) in repo.tree_entries(dirs[report_id]).items()}


def report_commit(
    repo: GitRepo, old: str | None, report_id: str, files: Mapping[str, bytes], message: str
) -> str:
    """The reports commit on `old` (the ref's tip) that adds or updates one report's files;
    the ref is not moved (a resume moves it with its checkpoint, in one transaction)."""
    top = repo.read_commit(old).tree if old else repo.empty_tree()
    current = repo.tree_entry(top, report_id)
    base = current[0] if current and current[1] == _TREE else None
    sub = repo.write_tree({n: (repo.write_blob(d), _BLOB) for n, d in files.items()}, base=base)
    new_top = repo.write_tree({report_id: (sub, _TREE)}, base=top)
    return repo.commit(new_top, [old] if old else [], message, sign=True)


def _report_dirs(repo: GitRepo, task: TaskName) -> dict[str, str]:
    tip = repo.read_ref(task.reports_ref)
    if tip is None:
        return {}
    top = repo.read_commit(tip).tree
    return {name: oid for name, (oid, mode) in repo.tree_entries(top).items() if mode == _TREE}


def read_report(repo: GitRepo, task: TaskName, report_id: str | None = None) -> dict[str, JSON]:
    dirs = _report_dirs(repo, task)
    if not dirs:
        raise NotFound(f"task {task} has no recovery report", hint=f"run `git ckpt resume {task}`")
    if report_id is None:
        report_id = max(dirs)  # ids are ULIDs: the newest sorts last
    matches = [d for d in dirs if d.startswith(report_id.upper())]
    if len(matches) != 1:
        raise NotFound(
            f"no single report {report_id!r} for task {task}", hint=f"see `git ckpt report {task}`"
        )
    files = repo.tree_entries(dirs[matches[0]])
    if "report.json" not in files:
        raise CorruptError(f"report {matches[0]} has no report.json")
    report = json.loads(repo.read_blob(files["report.json"][0]))
    if not isinstance(report, dict):
        raise CorruptError(f"report {matches[0]} is not a JSON object")
    report["files"] = sorted(files)
    report["path"] = f"{task.reports_ref}:{matches[0]}/report.md"
    return report


def list_reports(repo: GitRepo, task: TaskName) -> list[dict[str, JSON]]:
    out = []
    for rid in sorted(_report_dirs(repo, task)):
        r = read_report(repo, task, rid)
        out.append(
            {
                "id": rid,
                "started": r.get("started"),
                "outcome": r.get("outcome"),
                "start": (r.get("locate") or {}).get("start", {}).get("id")
                if isinstance(r.get("locate"), dict) and isinstance(r["locate"].get("start"), dict)
                else None,
                "verdict": (r.get("confirmation") or {}).get("passed")
                if isinstance(r.get("confirmation"), dict)
                else None,
            }
        )
    return out


def report_markdown(report: Mapping[str, JSON]) -> str:
    lines = [f"# Recovery report {report.get('id')} for task {report.get('task')}", ""]
    lines.append(f"- started: {report.get('started')}")
    lines.append(f"- outcome: {report.get('outcome')} (exit {report.get('exit')})")
    locate = report.get("locate")
    if isinstance(locate, dict):
        start = locate.get("start")
        sid = start.get("id") if isinstance(start, dict) else None
        lines.append(f"- start: {sid} — {locate.get('reason')}")
    for key in ("locate", "verify", "assertions", "rollback", "timings", "confirmation"):
        if report.get(key) is not None:
            lines += [
                "",
                f"## {key}",
                "```json",
                json.dumps(json_safe(report[key]), indent=2, sort_keys=True),
                "```",
            ]
    return "\n".join(lines) + "\n"


def report_files(
    report: Mapping[str, JSON],
    brief_md: str | None,
    redactor: Redactor,
    restatement: str | None = None,
) -> dict[str, bytes]:
    """The files of one report, redacted: the only input of `save_report`.

    A report quotes the contract's constraint texts, command outputs, paths and
    the agent's restatement: all of it goes through the redactor first.
    """
    clean = redactor.value(dict(report))
    assert isinstance(clean, dict)
    files = {
        "report.json": (dumps(clean) + "\n").encode(),  # a file name's raw byte as \udcXX
        "report.md": _utf8(report_markdown(clean)),
    }
    if brief_md is not None:
        files["brief.md"] = _utf8(redactor.text(brief_md))
    if restatement is not None:
        files["restatement.md"] = _utf8(redactor.text(restatement))
    return files


def _utf8(text: str) -> bytes:
    """Markdown as UTF-8: a file name's raw byte left in a text is written as git's `\\ooo`
    (paths are quoted where they are written: `paths.quote`; this is the floor)."""
    return escape_lone_bytes(text).encode()
