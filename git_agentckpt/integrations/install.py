"""`git ckpt integrate claude-code|codex [--remove]`: hooks in the agent's settings and a
marked block in CLAUDE.md / AGENTS.md, put in and taken out again byte for byte.

Plain file edits. Every file is read and its new text computed before anything is
written, so a settings file that is not valid JSON stops the command with every file as
it was. What removal needs to give the bytes back (which file, directory and container
was created, the whitespace that was inside an emptied container, what was put before a
block) is kept in a record next to the tool's other runtime files: `.git/agent/` of the
worktree for project files, `$XDG_CONFIG_HOME/git-ckpt/` for files in the home directory.
The record holds no content of the files.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from git_agentckpt.errors import NotFound, UsageError
from git_agentckpt.integrations import instructions, settings_hooks
from git_agentckpt.integrations.json_edit import JsonTextError
from git_agentckpt.integrations.settings_hooks import HookSpec
from git_agentckpt.settings import CONTRACTS_DIR

RECORD_NAME = "integrations.json"
RECORD_VERSION = 1

CLAUDE_HOOKS = (
    HookSpec("SessionStart", "startup|resume|compact|clear", 30),
    HookSpec("PreCompact", None, 60),
    HookSpec("PostToolUse", None, 15),
    HookSpec("PostToolUseFailure", None, 15),
    HookSpec("UserPromptSubmit", None, 10),
    HookSpec("Stop", None, 60),
    HookSpec("StopFailure", None, 60),
    HookSpec("SessionEnd", None, 30),
    HookSpec("PostCompact", None, 30),
)
CODEX_HOOKS = (
    HookSpec("SessionStart", "startup|resume|compact|clear", 30),
    HookSpec("UserPromptSubmit", None, 10),
    HookSpec("PostToolUse", None, 15),
    HookSpec("PreCompact", None, 60),
    HookSpec("PostCompact", None, 30),
    HookSpec("Stop", None, 60),
)


@dataclass(frozen=True)
class Agent:
    name: str
    hooks: tuple[HookSpec, ...]
    settings: dict[str, str]  # scope -> settings file (worktree-relative, or under ~)
    instructions: str  # CLAUDE.md | AGENTS.md at the worktree root (project scopes)
    block: Callable[[], list[str]]


AGENTS = {
    "claude-code": Agent(
        "claude-code",
        CLAUDE_HOOKS,
        {
            "project": ".claude/settings.json",
            "local": ".claude/settings.local.json",
            "user": "~/.claude/settings.json",
        },
        "CLAUDE.md",
        instructions.claude_block_lines,
    ),
    "codex": Agent(
        "codex",
        CODEX_HOOKS,
        {"project": ".codex/hooks.json", "user": "$CODEX_HOME/hooks.json"},
        "AGENTS.md",
        instructions.codex_block_lines,
    ),
}


@dataclass(frozen=True)
class Places:
    """Where things are: plain paths the facade found."""

    worktree: str | None  # the work tree's root (None: --user outside a repository)
    agent_dir: str | None  # the worktree's runtime directory (.git/agent)
    home: str
    codex_home: str  # $CODEX_HOME, else ~/.codex
    config_dir: str  # $XDG_CONFIG_HOME/git-ckpt


@dataclass(frozen=True)
class FileChange:
    path: str  # as shown: relative to the worktree root, or ~/…
    file: str  # absolute
    change: str  # created | updated | unchanged | removed
    what: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "file": self.file, "change": self.change, "what": self.what}


@dataclass(frozen=True)
class IntegrateResult:
    agent: str
    scope: str
    remove: bool
    files: list[FileChange]
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(f.change != "unchanged" for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "scope": self.scope,
            "action": "remove" if self.remove else "integrate",
            "changed": self.changed,
            "files": [f.to_json() for f in self.files],
            "notes": self.notes,
        }


@dataclass
class _Plan:
    key: str
    shown: str
    path: str
    before: str | None
    after: str | None  # None: delete the file
    what: str
    entry: dict[str, Any] | None  # the record entry afterwards (None: drop it)
    dirs: list[str] = field(default_factory=list)  # created by integrate: removed if empty

    @property
    def change(self) -> str:
        if self.before == self.after:
            return "unchanged"
        if self.before is None:
            return "created"
        return "removed" if self.after is None else "updated"


def integrate(agent_name: str, scope: str, places: Places, *, remove: bool) -> IntegrateResult:
    agent = AGENTS[agent_name]
    if scope not in agent.settings:
        raise UsageError(
            f"{agent_name} has no {scope} settings file",
            hint="use " + " or ".join(f"--{s}" for s in agent.settings),
        )
    record_path = _record_path(scope, places)
    record = _load_record(record_path)
    owner = f"{agent_name}:{scope}"
    plans = [_settings_plan(agent, scope, places, record, remove)]
    if scope != "user":
        plans.append(_block_plan(agent, places, record, remove, owner))
    if remove and all(p.change == "unchanged" for p in plans):
        raise NotFound(
            f"nothing of git ckpt to remove: {' and '.join(p.shown for p in plans)} hold no "
            f"hooks or block of `git ckpt integrate {agent_name}`",
            hint="nothing was changed",
        )
    for plan in plans:
        _apply(plan)
        if plan.entry is None:
            record.pop(plan.key, None)
        else:
            record[plan.key] = plan.entry
    _save_record(record_path, record)
    files = [FileChange(p.shown, p.path, p.change, p.what) for p in plans]
    return IntegrateResult(agent_name, scope, remove, files, _notes(agent, scope, places, remove))


def _settings_path(agent: Agent, scope: str, places: Places) -> tuple[str, str, str]:
    """(record key, shown path, absolute path) of the settings file."""
    rel = agent.settings[scope]
    if scope == "user":
        full = (
            os.path.join(places.codex_home, "hooks.json")
            if agent.name == "codex"
            else os.path.join(places.home, ".claude", "settings.json")
        )
        return full, _shown(full, places), full
    assert places.worktree is not None
    return rel, rel, os.path.join(places.worktree, rel)


def _shown(full: str, places: Places) -> str:
    home = places.home.rstrip("/") + "/"
    return "~/" + full[len(home) :] if full.startswith(home) else full


def _settings_plan(
    agent: Agent, scope: str, places: Places, record: dict[str, Any], remove: bool
) -> _Plan:
    key, shown, path = _settings_path(agent, scope, places)
    before = _read(path, shown)
    entry = record.get(key)
    try:
        if remove:
            return _strip_plan(agent, key, shown, path, before, entry)
        base = settings_hooks.NEW_FILE if before is None else before
        # a file deleted since the last run is created afresh: --remove deletes it again
        old: dict[str, Any] = {"created": before is None}
        if before is not None and isinstance(entry, dict):
            old = entry
        edit = settings_hooks.merge(base, agent.name, agent.hooks, old)
    except JsonTextError as exc:
        raise UsageError(
            f"{shown} line {exc.line}: not valid settings JSON: {exc}",
            hint="fix the file and run the command again; nothing was changed",
        ) from exc
    # the directories integrate made for this file; one another integration made
    # (.claude/ for both settings files) goes with whichever of them is removed last
    made = _missing_dirs(os.path.dirname(path)) if before is None else []
    made += [
        d
        for e in record.values()
        if isinstance(e, dict)
        for d in e.get("dirs", [])
        if isinstance(d, str) and path.startswith(d + "/")
    ]
    edit.entry["dirs"] = sorted(set(made), key=len)
    what = f"{edit.count} hooks added" if edit.count else f"{len(agent.hooks)} hooks present"
    after = edit.text if edit.count else before
    return _Plan(key, shown, path, before, after, what, edit.entry)


def _strip_plan(
    agent: Agent, key: str, shown: str, path: str, before: str | None, entry: Any
) -> _Plan:
    entry = entry if isinstance(entry, dict) else None
    if before is None:
        return _Plan(key, shown, path, None, None, "absent", None)
    edit = settings_hooks.strip(before, agent.name, agent.hooks, entry)
    if not edit.count:
        return _Plan(key, shown, path, before, before, "no hooks of git ckpt", None)
    # A file integrate created goes when nothing else is left in it (without a record,
    # when exactly what a created file is left with remains).
    created = entry is None or bool(entry.get("created"))
    after = None if created and edit.text == settings_hooks.NEW_FILE else edit.text
    if entry is None:  # no record (another clone integrated): the agent's own directory
        dirs = [os.path.dirname(path)]
    else:
        dirs = [d for d in entry.get("dirs", []) if isinstance(d, str)]
    return _Plan(key, shown, path, before, after, f"{edit.count} hooks removed", None, dirs)


def _block_plan(
    agent: Agent, places: Places, record: dict[str, Any], remove: bool, owner: str
) -> _Plan:
    assert places.worktree is not None
    key = agent.instructions
    path = os.path.join(places.worktree, key)
    before = _read(path, key)
    entry = record.get(key) if isinstance(record.get(key), dict) else None
    owners = [o for o in (entry or {}).get("owners", []) if isinstance(o, str)]
    if remove:
        others = [o for o in owners if o != owner]
        if before is None or instructions.find_block(before) is None:
            return _Plan(key, key, path, before, before, "no block of git ckpt", None)
        if others:
            kept = {**(entry or {}), "owners": others}
            return _Plan(key, key, path, before, before, f"block kept for {others[0]}", kept)
        after: str | None = instructions.remove_block(before, (entry or {}).get("prefix"))
        if after == "" and (entry is None or entry.get("created")):
            after = None
        return _Plan(key, key, path, before, after, "block removed", None)
    edit = instructions.add_block(before or "", agent.block(), agent.name)
    if entry is None or instructions.find_block(before or "") is None:
        entry = {"created": before is None, "prefix": edit.prefix}
    entry = {**entry, "owners": sorted({*owners, owner})}
    if agent.name == "claude-code":
        what = f"block importing {CONTRACTS_DIR}/constraints.md"
    else:
        what = f"block on steps, check, resume and {CONTRACTS_DIR}/"
    return _Plan(key, key, path, before, edit.text, what, entry)


def _notes(agent: Agent, scope: str, places: Places, remove: bool) -> list[str]:
    if remove:
        return ["restart the agent's running sessions: they keep the hooks they started with"]
    notes: list[str] = []
    if shutil.which("git-ckpt") is None:
        notes.append("git-ckpt is not on PATH: the hooks run `git ckpt …`; install it first")
    if places.worktree is not None and not os.path.exists(
        os.path.join(places.worktree, CONTRACTS_DIR, "constraints.md")
    ):
        notes.append(f"{CONTRACTS_DIR}/constraints.md does not exist yet: run `git ckpt init`")
    if scope == "local":
        notes.append(
            ".claude/settings.local.json is yours alone: if git does not ignore it yet, add it "
            "to .gitignore or .git/info/exclude"
        )
    if scope == "user":
        notes.append(
            f"--user leaves {agent.instructions} alone: run the command with --project in a "
            "project to add its block there"
        )
    if agent.name == "codex":
        notes.append(
            "Codex runs new hooks only once you trust them: open /hooks in codex and trust "
            "them (non-interactive runs: `codex exec --dangerously-bypass-hook-trust`)"
        )
    else:
        notes.append("Claude Code reads hooks when a session starts: restart running sessions")
    return notes


# -- files ---------------------------------------------------------------------------------


def _read(path: str, shown: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise UsageError(
            f"{shown} is a directory", hint="move it away; nothing was changed"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{shown} is not valid UTF-8 (byte offset {exc.start})",
            hint="convert it to UTF-8; nothing was changed",
        ) from exc


def _missing_dirs(directory: str) -> list[str]:
    """The directories `os.makedirs(directory)` would create, outermost first."""
    missing: list[str] = []
    while directory and not os.path.isdir(directory):
        missing.insert(0, directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return missing


def _apply(plan: _Plan) -> None:
    if plan.change == "unchanged":
        return
    if plan.after is None:
        os.unlink(plan.path)
        _remove_empty(plan.dirs)  # only when empty: the user's files stay
        return
    if plan.before is None:
        os.makedirs(os.path.dirname(plan.path), exist_ok=True)
    _write_atomic(plan.path, plan.after.encode("utf-8"))


def _write_atomic(path: str, data: bytes) -> None:
    """Replace the file (through a symlink to it: dotfiles are often links) in one rename,
    keeping its mode."""
    target = os.path.realpath(path)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=".git-ckpt-", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# -- the record ----------------------------------------------------------------------------


def _record_path(scope: str, places: Places) -> str:
    if scope == "user":
        return os.path.join(places.config_dir, RECORD_NAME)
    assert places.agent_dir is not None
    return os.path.join(places.agent_dir, RECORD_NAME)


def _load_record(path: str) -> dict[str, Any]:
    """The record's entries by file (and, under "", the directories made for the record);
    a missing or unreadable record is an empty one (removal then works from the files)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("v") != RECORD_VERSION:
        return {}
    files = data.get("files")
    out = dict(files) if isinstance(files, dict) else {}
    dirs = data.get("dirs")
    out[""] = [d for d in dirs if isinstance(d, str)] if isinstance(dirs, list) else []
    return out


def _save_record(path: str, files: dict[str, Any]) -> None:
    """Write the record; an empty one is deleted, with the directories made for it."""
    dirs = files.pop("", None) or []
    if not files:
        if os.path.exists(path):
            os.unlink(path)
            _remove_empty(dirs)
        return
    if not os.path.exists(path):
        dirs = _missing_dirs(os.path.dirname(path))
        os.makedirs(os.path.dirname(path), exist_ok=True)
    text = json.dumps({"v": RECORD_VERSION, "dirs": dirs, "files": files}, indent=2, sort_keys=True)
    _write_atomic(path, (text + "\n").encode("utf-8"))


def _remove_empty(dirs: list[str]) -> None:
    """Remove the directories integrate made (innermost first) while they are empty."""
    for directory in reversed(dirs):
        try:
            os.rmdir(directory)
        except OSError:
            break
