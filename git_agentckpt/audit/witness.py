"""The witness file: what `git ckpt push` last pushed, kept outside the repository.

A store rolled back as a whole (a backup copied over `.git`, a VM snapshot)
is consistent with itself, mirrors included: no check inside it can see that
it lost history. The witness lives elsewhere (by default
`$XDG_STATE_HOME/git-ckpt/witness/<repository id>.json`; `GIT_CKPT_WITNESS`
or `git config ckpt.witness` name another file) and records, per pushed
ref, the tip pushed and, for event logs, the highest event number. `verify`
reads it when it exists: every recorded tip must still be contained in its
ref, and every log must have reached its number.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

from git_agentckpt.errors import CorruptError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.model import JSON, iso_now

WITNESS_ENV = "GIT_CKPT_WITNESS"
CONFIG_KEY = "ckpt.witness"


def repo_id(repo: GitRepo) -> str:
    """This clone, as the witness names it: its resolved common git dir, hashed."""
    path = os.path.realpath(repo.common_dir)
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def witness_path(repo: GitRepo, given: str | None = None) -> str:
    chosen = given or os.environ.get(WITNESS_ENV) or repo.config_get(CONFIG_KEY)
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(state, "git-ckpt", "witness", repo_id(repo) + ".json")


def load(path: str) -> dict[str, dict[str, JSON]] | None:
    """{ref: {"tip": id, "seq": n?, ...}} from the file, None when there is none."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(16 << 20)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptError(f"cannot read the witness file {path}: {exc.strerror}") from exc
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise CorruptError(
            f"the witness file {path} is not JSON",
            hint="it was damaged: restore it from a backup, or move it away",
        ) from exc
    refs = doc.get("refs") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("v") != 1 or not isinstance(refs, dict):
        raise CorruptError(f"the witness file {path} is not a version 1 witness")
    return {
        str(k): v for k, v in refs.items() if isinstance(v, dict) and isinstance(v.get("tip"), str)
    }


def record(
    repo: GitRepo, pushed: dict[str, tuple[str, int | None]], remote: str, path: str
) -> None:
    """Add what was just pushed ({ref: (tip, highest event number or None)}) to the file."""
    try:
        refs: dict[str, dict[str, JSON]] = load(path) or {}
    except CorruptError:
        refs = {}  # a damaged witness is replaced by what is known now
    now = iso_now()
    for ref, (tip, seq) in pushed.items():
        entry: dict[str, JSON] = {"tip": tip, "remote": remote, "at": now}
        if seq is not None:
            entry["seq"] = seq
        refs[ref] = entry
    doc = {"v": 1, "repository": os.path.realpath(repo.common_dir), "updated": now, "refs": refs}
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".witness-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
