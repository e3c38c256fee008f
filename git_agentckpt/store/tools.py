"""The environment record of a checkpoint: tool versions and hashes of named files."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess

from git_agentckpt import __version__
from git_agentckpt.model import JSON


@functools.cache
def git_version() -> str:
    try:
        out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    return out.stdout.strip().removeprefix("git version ") or "unknown"


def tool_versions() -> dict[str, JSON]:
    return {
        "git-ckpt": __version__,
        "git": git_version(),
        "python": platform.python_version(),
    }


def file_hashes(workdir: str, paths: tuple[str, ...]) -> dict[str, JSON]:
    """sha256 of each named file (None when it is missing)."""
    out: dict[str, JSON] = {}
    for rel in paths:
        full = os.path.join(workdir, rel)
        try:
            h = hashlib.sha256()
            with open(full, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[rel] = h.hexdigest()
        except OSError:
            out[rel] = None
    return out
