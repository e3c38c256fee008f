"""Sealed, deterministic environment for tests on real git repositories."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the reliability scenarios with large counts (minutes to hours)",
    )


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    """True under `pytest --long`: reliability tests scale their counts up."""
    return bool(request.config.getoption("--long"))


SEALED_VARS = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # Calls run in their own process: a warm server per test HOME would outlive the
    # test (tests/test_server.py turns it on and stops it).
    "GIT_CKPT_SERVER": "off",
}
STRIPPED_PREFIXES = ("GIT_", "GIT_CKPT_")


@pytest.fixture(autouse=True)
def hermetic_seal(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporary HOME and XDG dirs, no system config, fixed identity and dates."""
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith(STRIPPED_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for key, value in SEALED_VARS.items():
        monkeypatch.setenv(key, value)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = user@example.com\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    """Run real git in `cwd` and return its stdout (stripped)."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, input=input
    )
    return proc.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """A fresh repository with one commit: README.md and src/app.py."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "README.md").write_text("hello\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    yield root


@pytest.fixture
def person_at_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """`confirm --by-human` as if a person sat at a terminal: the seam says stdin is one
    (CliRunner's is not); the test gives the person's answer as input ("y\\n")."""
    from git_agentckpt.recovery import person

    monkeypatch.setattr(person, "stdin_is_terminal", lambda: True)
