"""The work-tree watcher inside the real daemon (issue 12): a checkpoint served by the
daemon runs git on the changed paths only, and gives the tree a full scan gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_helpers import ok, serving, status, watch_log, watching
from test_private_index import checkpoint_tree, listing, plumbing_tree

pytestmark = pytest.mark.mode("daemon", reason="tests of the daemon: they turn it on themselves")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from serving(monkeypatch, tmp_path)


def test_checkpoints_through_the_daemon_look_only_at_changes(repo: Path, served: None) -> None:
    ok(repo, "init")
    ok(repo, "daemon", "start")
    watching(repo)
    ok(repo, "task", "start", "t", "--goal", "watched")
    ok(repo, "create", "-t", "t", "-m", "first: a full scan")
    assert "full scan: first snapshot since the daemon started" in watch_log(repo)
    scans = watch_log(repo).count("full scan:")
    for i in range(3):
        (repo / "src" / f"new{i}.py").write_text(f"print({i})\n")
        (repo / "src" / "app.py").write_text(f"print('changed {i}')\n")
        ok(repo, "create", "-t", "t", "-m", f"change {i}")
        assert listing(repo, checkpoint_tree(repo)) == listing(repo, plumbing_tree(repo))
    assert watch_log(repo).count("full scan:") == scans  # the changes only
    watched = status(repo)["watcher"]
    assert watched["state"] == "watching" and watched["directories"] >= 2
    assert status(repo)["served"] >= 4


def test_watch_off_scans_every_time(
    repo: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CKPT_WATCH", "off")
    ok(repo, "init")
    ok(repo, "daemon", "start")
    ok(repo, "task", "start", "t", "--goal", "not watched")
    (repo / "src" / "app.py").write_text("print('changed')\n")
    ok(repo, "create", "-t", "t")
    assert "watcher" not in status(repo)
    assert listing(repo, checkpoint_tree(repo)) == listing(repo, plumbing_tree(repo))
    assert watch_log(repo) == ""
