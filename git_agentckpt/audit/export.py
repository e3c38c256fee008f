"""`git ckpt export TASK|CKPT --to DIR`: the trail as plain files, for reviewers and tools
that do not read git.

    DIR/export.json                      what is here and how to check it (index)
    DIR/SHA256SUMS                       every file's sha256 (`sha256sum -c SHA256SUMS`)
    DIR/tasks/<task>/events.jsonl        the event log, exactly as `git ckpt log --json`
    DIR/tasks/<task>/payloads/<id>.json  event payloads stored apart (store/payloads.py)
    DIR/tasks/<task>/reports/<id>/…      the recovery reports, as stored
    DIR/tasks/<task>/contracts/…         `.agent/contracts/` of the last exported checkpoint
    DIR/tasks/<task>/checkpoints/0001-<checkpoint id>/
        manifest.json                    the checkpoint and every file (audit/manifest.py)
        task_state.json                  the state note
        assertions.json                  the assertions note

A CKPT exports that checkpoint's folder and its contracts only. Deterministic: the
same trail gives the same bytes (sorted keys and file lists, `\\n` line ends, no time
or place of the export itself). Secret files (`secret_paths`) are listed by path and
mode only; everything taken from the trail's notes, events and reports passes the
redactor again (a no-op on what the tool wrote; a fetched trail may hold anything),
and what it changed is counted in export.json.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from git_agentckpt import __version__
from git_agentckpt.audit.export_write import ExportDir, canonical_json, json_line, safe_component
from git_agentckpt.audit.manifest import (
    DigestCache,
    manifest_pieces,
    secret_patterns,
)
from git_agentckpt.errors import CkptError
from git_agentckpt.git.blob_stream import blob_pieces
from git_agentckpt.model import JSON
from git_agentckpt.redact import Redactor, default_redactor
from git_agentckpt.settings import CONTRACTS_DIR
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.payloads import refs_in
from git_agentckpt.store.reading import TaskReader
from git_agentckpt.store.refs import TaskName

_TREE = 0o040000
_FILE_MODES = (0o100644, 0o100755)

HOW_TO_CHECK = [
    "sha256sum -c SHA256SUMS  (run in this directory: every exported file is as written)",
    "git ckpt verify --dir THIS_DIR [--checkpoint ID]  (run in a working tree: it matches "
    "the manifest of the last, or the named, exported checkpoint)",
]


@dataclass
class ExportResult:
    directory: str
    scope: str  # task | checkpoint
    tasks: list[str]
    checkpoints: int
    files: int  # files written (SHA256SUMS lists them)
    redacted: int  # values the redactor changed on the way out
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, JSON]:
        return {
            "directory": self.directory,
            "scope": self.scope,
            "tasks": list(self.tasks),
            "checkpoints": self.checkpoints,
            "files": self.files,
            "redacted": self.redacted,
            "warnings": list(self.warnings),
        }


def export(reader: TaskReader, name: str, to: str, secret_paths: Sequence[str]) -> ExportResult:
    """Export task `name` (its whole trail), or the one checkpoint `name` names."""
    seen = len(reader.warnings)
    task: TaskName | None = None
    if name in {t.name for t in reader.tasks()}:
        task = reader.require_task(name)
        chain = list(reader.checkpoints(name))
        chain.reverse()
        chosen = chain
        scope = "task"
    else:
        one = reader.resolve(name)
        task = TaskName(one.task)
        chain = list(reader.store.chain(task))
        chain.reverse()
        chosen = [c for c in chain if c.commit == one.commit] or [one]
        scope = "checkpoint"
    out = ExportDir(to)
    try:
        job = _Export(reader, out, secret_paths)
        entry = job.task(task, chain, chosen, whole=scope == "task")
        skipped = [*reader.warnings[seen:], *job.warnings]  # damaged records, named
        index: dict[str, JSON] = {
            "v": 1,
            "tool": "git-ckpt",
            "version": __version__,
            "scope": scope,
            "tasks": [entry],
            "how_to_check": list(HOW_TO_CHECK),
            "secret_files": "listed by path, mode and status only: no content, hash or size",
            "redacted_on_export": job.redacted,
            "warnings": list(skipped),
        }
        out.write("export.json", canonical_json(index))
        files = out.written
        directory = out.finish()
    except BaseException:
        out.discard()
        raise
    return ExportResult(
        directory, scope, [task.name], len(chosen), files, job.redacted, list(job.warnings)
    )


class _Export:
    def __init__(self, reader: TaskReader, out: ExportDir, secret_paths: Sequence[str]) -> None:
        self.reader = reader
        self.repo = reader.repo
        self.out = out
        self.secret_paths = tuple(secret_paths)
        self.digests = DigestCache(self.repo)
        self.redactor: Redactor = default_redactor()
        self._redacted_before = self.redactor.count()
        self.warnings: list[str] = []

    @property
    def redacted(self) -> int:
        return self.redactor.count() - self._redacted_before

    def _clean(self, value: JSON) -> JSON:
        return self.redactor.value(value)

    def task(
        self, task: TaskName, chain: list[Checkpoint], chosen: list[Checkpoint], whole: bool
    ) -> dict[str, JSON]:
        base = f"tasks/{task.name}"
        width = max(4, len(str(len(chain))))
        position = {c.commit: i for i, c in enumerate(chain, start=1)}
        listed: list[JSON] = []
        for ckpt in chosen:
            n = position.get(ckpt.commit, 0)
            folder = f"{base}/checkpoints/{n:0{width}d}-{ckpt.id}"
            parent = chain[n - 2] if n >= 2 else None
            self.checkpoint(folder, ckpt, parent, n)
            listed.append(
                {
                    "folder": folder,
                    "checkpoint": ckpt.id,
                    "commit": ckpt.commit,
                    "number": ckpt.number,
                    "position": n,
                    "trigger": ckpt.trigger,
                }
            )
        entry: dict[str, JSON] = {"task": task.name, "folder": base, "checkpoints": listed}
        last = chosen[-1] if chosen else None
        entry["contracts"] = self.contracts(f"{base}/contracts", last) if last else None
        if whole:
            entry["events"], entry["payloads"] = self.events(task, base)
            entry["reports"] = self.reports(task, f"{base}/reports")
        return entry

    # -- one checkpoint ---------------------------------------------------------------

    def checkpoint(self, folder: str, ckpt: Checkpoint, parent: Checkpoint | None, n: int) -> None:
        patterns = secret_patterns(self.repo, ckpt.tree, self.secret_paths)
        pieces = manifest_pieces(
            self.repo, ckpt, parent, n, patterns, self.digests, clean=self._clean
        )
        self.out.write_pieces(f"{folder}/manifest.json", pieces)
        store = self.reader.store
        try:
            state: JSON = store.state_note(ckpt.commit)
        except CkptError as exc:
            self.warnings.append(f"checkpoint {ckpt.id}: {exc.one_line()} (state not exported)")
            state = None
        self.out.write(f"{folder}/task_state.json", canonical_json(self._clean(state)))
        try:
            assertions: JSON = store.assertions_note(ckpt.commit)
        except CkptError as exc:
            self.warnings.append(f"checkpoint {ckpt.id}: {exc.one_line()} (assertions skipped)")
            assertions = []
        doc: JSON = {"v": 1, "checkpoint": ckpt.id, "assertions": self._clean(assertions)}
        self.out.write(f"{folder}/assertions.json", canonical_json(doc))

    def contracts(self, folder: str, ckpt: Checkpoint) -> JSON:
        """`.agent/contracts/` of `ckpt`'s tree, file by file (secret and unsafe names and
        links are named in the warnings, never written)."""
        entry = self.repo.tree_entry(ckpt.tree, CONTRACTS_DIR)
        if entry is None or entry[1] != _TREE:
            return {"from": ckpt.id, "files": []}
        patterns = secret_patterns(self.repo, ckpt.tree, self.secret_paths)
        written: list[JSON] = []
        for f in sorted(self.repo.tree_files(entry[0]), key=lambda f: f.path):
            full = f"{CONTRACTS_DIR}/{f.path}"
            if patterns.matches(full):
                self.warnings.append(f"{full}: a secret path (secret_paths), not copied")
            elif f.mode not in _FILE_MODES:
                self.warnings.append(f"{full}: not a regular file (mode {f.mode:o}), not copied")
            elif not all(safe_component(p) for p in f.path.split("/")):
                self.warnings.append(f"{full!r}: a name unsafe to write, not copied")
            else:
                self.out.write_pieces(f"{folder}/{f.path}", blob_pieces(self.repo, f.id))
                written.append(f.path)
        return {"from": ckpt.id, "files": written}

    # -- the task's trail -------------------------------------------------------------

    def events(self, task: TaskName, base: str) -> tuple[int, int]:
        """events.jsonl, as `git ckpt log --json` prints it; the payloads stored apart."""
        if not self.reader.log.exists(task):
            return 0, 0
        count = 0
        apart: dict[str, str] = {}  # blob -> the event commit that holds it

        def lines() -> Iterator[bytes]:
            nonlocal count
            for entry in self.reader.log_entries(task.name):
                before = self.redactor.count()
                clean = self._clean(entry.obj)
                count += 1
                for blob in refs_in(entry.obj):
                    apart.setdefault(blob, entry.commit)
                if self.redactor.count() != before:
                    yield json_line(clean)
                else:
                    yield (entry.json_line() + "\n").encode("utf-8", "surrogateescape")

        self.out.write_pieces(f"{base}/events.jsonl", lines())
        for blob, commit in sorted(apart.items()):
            self.payload(f"{base}/payloads/{blob}.json", blob, commit)
        return count, len(apart)

    def payload(self, rel: str, blob: str, commit: str) -> None:
        """A payload blob, only from the tree of the event commit that refers to it (an id
        from anywhere else is not followed: it could name any object of the repository)."""
        tree = self.repo.read_commit(commit).tree
        found = self.repo.tree_entry(tree, blob)
        if found is None or found[0] != blob:
            self.warnings.append(f"payload {blob[:12]} is not in its event commit (skipped)")
            return
        import json

        try:
            value = json.loads(self.repo.read_blob(blob).decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError) as exc:
            self.warnings.append(f"payload {blob[:12]} is damaged ({exc}) (skipped)")
            return
        self.out.write(rel, canonical_json(self._clean(value)))

    def reports(self, task: TaskName, folder: str) -> list[JSON]:
        tip = self.repo.read_ref(task.reports_ref)
        if tip is None:
            return []
        top = self.repo.read_commit(tip).tree
        done: list[JSON] = []
        for rid, (oid, mode) in sorted(self.repo.tree_entries(top).items()):
            if mode != _TREE or not safe_component(rid):
                continue
            for fname, (blob, fmode) in sorted(self.repo.tree_entries(oid).items()):
                if fmode not in _FILE_MODES or not safe_component(fname):
                    self.warnings.append(f"report {rid}: {fname!r} not copied")
                    continue
                self.out.write(f"{folder}/{rid}/{fname}", self._report_file(fname, blob))
            done.append(rid)
        return done

    def _report_file(self, name: str, blob: str) -> bytes:
        data = self.repo.read_blob(blob)
        text = data.decode("utf-8", "surrogateescape")
        if name.endswith(".json"):
            import json

            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                return self.redactor.text(text).encode("utf-8", "surrogateescape")
            before = self.redactor.count()
            clean = self._clean(value)
            return data if self.redactor.count() == before else canonical_json(clean)
        return self.redactor.text(text).encode("utf-8", "surrogateescape")
