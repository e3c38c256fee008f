"""Install the real agents the end-to-end tests drive: pinned npm packages in a cache
outside the sealed test HOME, reused when present, installed under a file lock.

The cache is `$GIT_CKPT_AGENT_CACHE` when set, else `~/.cache/git-agentckpt/agents` of
the HOME the test run started with (captured when this module is imported, before the
autouse fixture of conftest.py seals HOME). Each package lives in its own directory
`<name>@<version>`; an install goes to a scratch directory beside it and is renamed into
place only once its binary answered `--version`, so a killed install never leaves a
half package that looks ready. Tests are skipped, with the reason, only where node or
npm is missing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# Read at import, before conftest.py's autouse fixture seals HOME and strips GIT_CKPT_*.
REAL_HOME = Path(os.environ.get("HOME") or tempfile.gettempdir())
CACHE_ENV = "GIT_CKPT_AGENT_CACHE"
CACHE_OVERRIDE = os.environ.get(CACHE_ENV)
INSTALL_TIMEOUT = 900.0  # npm on a slow network: generous


@dataclass(frozen=True)
class Package:
    npm: str
    version: str
    command: str  # the executable under node_modules/.bin

    @property
    def dirname(self) -> str:
        return f"{self.npm.replace('/', '+')}@{self.version}"


CLAUDE = Package("@anthropic-ai/claude-code", "2.1.328", "claude")
CODEX = Package("@openai/codex", "0.169.0", "codex")


@dataclass(frozen=True)
class Installed:
    binary: Path
    seconds: float  # time this call took (an install, or the check of a cached one)
    cached: bool


def cache_root() -> Path:
    if CACHE_OVERRIDE:
        return Path(CACHE_OVERRIDE)
    return REAL_HOME / ".cache" / "git-agentckpt" / "agents"


def install(package: Package, root: Path | None = None) -> Installed:
    """The package's binary, installed into the cache first if it is not there."""
    start = time.monotonic()
    root = root or cache_root()
    target = root / package.dirname
    binary = target / "node_modules" / ".bin" / package.command
    if _answers(binary, package):
        return Installed(binary, time.monotonic() - start, True)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{package.dirname}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be installing the same package
        if not _answers(binary, package):
            _npm_install(package, root, target)
    if not _answers(binary, package):
        raise AssertionError(f"{package.npm}@{package.version} installed but does not run")
    return Installed(binary, time.monotonic() - start, False)


def require(package: Package) -> Installed:
    """`install` for a test: skipped (with the reason) only where node or npm is missing."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: the real-agent tests need them")
    return install(package)


def _answers(binary: Path, package: Package) -> bool:
    if not binary.exists():
        return False
    with tempfile.TemporaryDirectory() as home:  # neither agent may write the user's HOME
        env = {**os.environ, "HOME": home, "CODEX_HOME": home}
        proc = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, env=env, timeout=120
        )
    return proc.returncode == 0 and package.version in proc.stdout


def _npm_install(package: Package, root: Path, target: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{package.dirname}.", dir=root))
    try:
        proc = subprocess.run(
            [
                "npm",
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(scratch),
                "--cache",
                str(root / ".npm-cache"),
                f"{package.npm}@{package.version}",
            ],
            capture_output=True,
            text=True,
            # the user's npm settings (registry, proxy) live in the real HOME
            env={**os.environ, "HOME": str(REAL_HOME)},
            timeout=INSTALL_TIMEOUT,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"npm install {package.npm}@{package.version} failed: {proc.stderr[-2000:]}"
            )
        if target.exists():
            shutil.rmtree(target)  # a broken earlier install
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
