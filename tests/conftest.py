"""Sealed, deterministic environment for tests on real git repositories."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import modes
import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the reliability scenarios with large counts (minutes to hours)",
    )
    parser.addoption(
        "--mode",
        choices=("both", *modes.MODES),
        default="both",
        help="run the suite with the daemon on (as users get it), off, or both (tests/modes.py)",
    )


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    """True under `pytest --long`: reliability tests scale their counts up."""
    return bool(request.config.getoption("--long"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "mode(which, reason): the one mode a test makes sense in (tests/modes.py)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "ckpt_mode" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("--mode")
    wanted = [m for m in modes.allowed(metafunc.definition.get_closest_marker("mode"))]
    if chosen != "both":
        wanted = [m for m in wanted if m == chosen]
    metafunc.parametrize("ckpt_mode", wanted, indirect=True)


@pytest.fixture(autouse=True)
def ckpt_mode(request: pytest.FixtureRequest) -> str:
    """The mode this test runs in (tests/modes.py)."""
    return str(request.param)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many tests ran in each mode (a test's report counts once: its call, or the
    setup that skipped or failed it)."""
    counts: dict[str, Counter[str]] = {m: Counter() for m in modes.MODES}
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            if outcome == "passed" and getattr(report, "when", "") != "call":
                continue
            mode = modes.mode_of(getattr(report, "nodeid", ""))
            if mode is not None:
                counts[mode][outcome] += 1
    for mode, seen in counts.items():
        parts = ", ".join(f"{seen[k]} {k}" for k in ("passed", "failed", "error", "skipped"))
        terminalreporter.write_line(f"mode {mode}: {parts}")


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
}
STRIPPED_PREFIXES = ("GIT_", "GIT_CKPT_")


@pytest.fixture(autouse=True)
def hermetic_seal(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, ckpt_mode: str
) -> Iterator[None]:
    """Temporary HOME and XDG dirs, no system config, fixed identity and dates; the
    daemon on or off (`ckpt_mode`), every daemon the test started stopped after it."""
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
    for key, value in modes.MODE_ENV[ckpt_mode].items():
        monkeypatch.setenv(key, value)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = user@example.com\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    yield
    modes.stop_daemons(tmp_path_factory.getbasetemp())


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
