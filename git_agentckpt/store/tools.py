"""The environment record of a checkpoint: tool versions and hashes of named files."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess

from git_agentckpt import __version__
from git_agentckpt.model import JSON


@functools.cache
def git_version() -> str:
    """`git --version`, remembered per git binary (path and mtime) across processes."""
    exe = shutil.which("git")
    if exe is None:
        return "unknown"
    try:
        st = os.stat(exe)
    except OSError:
        return "unknown"
    key = f"{exe}:{st.st_mtime_ns}:{st.st_size}"
    cache_dir = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "git-ckpt"
    )
    cache = os.path.join(cache_dir, "git-version.json")
    try:
        with open(cache, encoding="utf-8") as fh:
            known = json.load(fh)
        if isinstance(known, dict) and known.get("key") == key:
            return str(known["version"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    version = out.stdout.strip().removeprefix("git version ") or "unknown"
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{cache}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"key": key, "version": version}, fh)
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home: ask git again next time
    return version


def tool_versions() -> dict[str, JSON]:
    return {
        "git-ckpt": __version__,
        "git": git_version(),
        "python": platform.python_version(),
    }


def sha256_file(path: str) -> str:
    """sha256 of a file, read in 1 MiB chunks (O_NONBLOCK: a FIFO cannot hang it)."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def file_hashes(workdir: str, paths: tuple[str, ...]) -> dict[str, JSON]:
    """sha256 of each named file (None when it is missing)."""
    out: dict[str, JSON] = {}
    for rel in paths:
        try:
            out[rel] = sha256_file(os.path.join(workdir, rel))
        except OSError:
            out[rel] = None
    return out
