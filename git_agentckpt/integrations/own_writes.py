"""The files an agent's file tool wrote, for its `tool.call` event (`data.files`).

Claude Code's Write, Edit, MultiEdit and NotebookEdit name the file (`file_path`,
`notebook_path`); Codex's apply_patch names each in its patch (`*** Add File:`,
`*** Update File:`, `*** Delete File:`, `*** Move to:`, relative to the call's `cwd`).
Each path inside the worktree (not in its git directory) is recorded with the sha256
of its content right after the call (`recovery/own_writes.py` reads them back when a
resume finds the files a killed turn wrote). What a shell command writes is not known.
"""

from __future__ import annotations

import os
import re
from typing import Any

from git_agentckpt.model import JSON
from git_agentckpt.recovery.own_writes import digest

FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
PATCH_TOOLS = ("apply_patch",)
_PATCH_LINE = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$", re.M)


def _inside(workdir: str, path: str) -> str | None:
    """`path` (absolute) relative to the worktree, `/`-separated; None when outside it
    or in its git directory. Directories are resolved, the file itself is not (a
    symlink the call wrote is the path, not its target)."""
    root = os.path.realpath(workdir)
    where = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    rel = os.path.relpath(where, root).replace(os.sep, "/")
    if rel in (".", "..") or rel.startswith("../") or rel.split("/")[0] == ".git":
        return None
    return rel


def _named(tool: str, tool_input: Any) -> list[str]:
    """The paths a file tool's call names, as given (none for any other tool)."""
    if tool in PATCH_TOOLS:  # the patch: the input itself, or its `command` / `input`
        patch = tool_input
        if isinstance(tool_input, dict):
            patch = tool_input.get("command", tool_input.get("input"))
        return _PATCH_LINE.findall(patch) if isinstance(patch, str) else []
    key = FILE_TOOLS.get(tool)
    value = tool_input.get(key) if key and isinstance(tool_input, dict) else None
    return [value] if isinstance(value, str) and value else []


def files_written(tool: str, tool_input: Any, cwd: str, workdir: str) -> dict[str, JSON]:
    """Each path the call wrote inside the worktree, with the sha256 of its content now
    (right after the call; None: it is gone)."""
    out: dict[str, JSON] = {}
    for name in _named(tool, tool_input):
        rel = _inside(workdir, os.path.normpath(os.path.join(cwd or workdir, name)))
        if rel is not None:
            out[rel] = digest(os.path.join(workdir, rel))
    return out
