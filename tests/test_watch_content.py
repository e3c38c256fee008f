"""Issue 10, item 9: the watch on ignored files decides "changed" by content, and a
person can accept the current content (`check --rebaseline`), with an event saying so."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, write

from git_agentckpt.contracts import watch

CONTRACT = """\
constraints:
  - id: raw
    text: Raw data under data/raw is read-only
    check: {kind: forbidden_paths, paths: ["data/raw/**"]}
"""


@pytest.fixture
def research(repo: Path) -> Path:
    """Gitignored raw data under a forbidden_paths glob, a task started on it."""
    write(repo / ".gitignore", "data/\n")
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract, ignored data")
    write(repo / "data" / "raw" / "train.csv", "a,b\n1,2\n")
    write(repo / "data" / "raw" / "test.csv", "a,b\n3,4\n")
    ckpt(repo, "task", "start", "t", "--goal", "train")
    return repo


def check(repo: Path) -> tuple[int, dict[str, object]]:
    result = ckpt(repo, "check", "t", "--json", ok=False)
    return result.exit_code, json.loads(result.stdout)


def events_of(repo: Path, type_: str) -> list[dict[str, Any]]:
    lines = ckpt(repo, "log", "t", "--json").stdout.splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == type_]


def test_touch_alone_is_no_violation(research: Path) -> None:
    """On main the watch compared size and mtime only: a touch was a write."""
    path = research / "data" / "raw" / "train.csv"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # `touch`
    code, doc = check(research)
    assert code == 0, doc
    assert doc["blocking_failures"] == []
    # the record's stamps were refreshed: the next check does not read the file again
    entry = json.loads(manifest(research).read_text())["files"]["data/raw/train.csv"]
    assert entry[1] == st.st_mtime_ns + 5_000_000_000


def manifest(repo: Path) -> Path:
    return repo / ".git" / "agent" / "watch" / "t.json"


def test_same_size_and_mtime_put_back_is_still_caught(research: Path) -> None:
    """A rewrite that keeps the size and puts the mtime back with os.utime: the ctime
    moved (it cannot be put back), so the content is hashed and compared."""
    path = research / "data" / "raw" / "train.csv"
    st = path.stat()
    path.write_text("a,b\n1,9\n")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    code, doc = check(research)
    assert code == 1 and doc["blocking_failures"] == ["raw"]
    assert check(research)[0] == 1  # still reported, until a person accepts it


def test_a_deleted_file_stays_reported_until_accepted(research: Path) -> None:
    os.unlink(research / "data" / "raw" / "test.csv")
    assert check(research)[0] == 1
    assert check(research)[0] == 1  # not forgotten by the record after the first report


def test_the_record_holds_each_files_sha256(research: Path) -> None:
    import hashlib

    doc = json.loads(manifest(research).read_text())
    assert doc["v"] == 2
    want = hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    assert doc["files"]["data/raw/train.csv"][5] == want


def test_a_racily_recorded_file_is_always_hashed(research: Path) -> None:
    """An entry recorded within the file system's clock tick of a write may share its
    stamps with a later version: marked racy, it is compared by content regardless."""
    path = research / "data" / "raw" / "train.csv"
    now = watch.scan(str(research), ["data/raw/**"])["data/raw/train.csv"]
    stale = watch.Entry(now, "0" * 64, racy=True)  # same stamps, other content
    before = watch.Manifest(("data/raw/**",), {"data/raw/train.csv": stale})
    found = watch.compare(before, str(research), ["data/raw/**"])
    assert found.diff.changed == ("data/raw/train.csv",)
    trusted = watch.Manifest(("data/raw/**",), {"data/raw/train.csv": watch.Entry(now, "0" * 64)})
    assert watch.compare(trusted, str(research), ["data/raw/**"]).diff.changed == ()
    assert path.stat().st_size == now[0]  # (stamps alone decide a non-racy entry)


def test_a_glob_added_to_the_contract_records_its_files_instead_of_reporting_them(
    research: Path,
) -> None:
    write(research / "data" / "ref" / "gold.csv", "x\n")
    write(
        research / ".agent" / "contracts" / "constraints.yaml",
        CONTRACT
        + "  - id: ref\n    text: Reference data is read-only\n"
        + '    check: {kind: forbidden_paths, paths: ["data/ref/**"]}\n',
    )
    code, doc = check(research)
    assert code == 0, doc  # on main every file under the new glob "appeared"
    write(research / "data" / "ref" / "gold.csv", "y, changed\n")
    assert check(research)[1]["blocking_failures"] == ["ref"]


def test_rebaseline_accepts_the_current_content_and_logs_who_and_what(
    research: Path, monkeypatch: pytest.MonkeyPatch, person_at_terminal: None
) -> None:
    write(research / "data" / "raw" / "train.csv", "a,b\n1,2\n5,6\n")  # changed
    os.unlink(research / "data" / "raw" / "test.csv")  # removed
    write(research / "data" / "raw" / "extra.csv", "new\n")  # added
    assert check(research)[0] == 1
    declined = ckpt(research, "check", "--rebaseline", "t", input="n\n", ok=False)
    assert declined.exit_code == 1 and "nothing accepted" in declined.stdout
    assert events_of(research, "constraint.rebaseline") == []
    done = ckpt(research, "check", "--rebaseline", "t", input="y\n")
    assert "changed  data/raw/train.csv" in done.stdout
    assert "removed  data/raw/test.csv" in done.stdout
    assert "added    data/raw/extra.csv" in done.stdout
    assert re.search(r"^pass +block +raw:", done.stdout, re.M), done.stdout  # checked after
    (ev,) = events_of(research, "constraint.rebaseline")
    assert ev["data"]["files"] == {
        "added": ["data/raw/extra.csv"],
        "removed": ["data/raw/test.csv"],
        "changed": ["data/raw/train.csv"],
    }
    assert str(ev["actor"]["agent"]).startswith("human:") and ev["data"]["by"]
    assert check(research)[0] == 0  # accepted: the constraint passes again
    write(research / "data" / "raw" / "train.csv", "a,b\n0,0\n")  # and watches the new content
    assert check(research)[0] == 1


def test_rebaseline_needs_a_person_at_a_terminal(research: Path) -> None:
    write(research / "data" / "raw" / "train.csv", "a,b\n1,2\n5,6\n")
    result = ckpt(research, "check", "--rebaseline", "t", "--json", ok=False)
    assert result.exit_code == 2
    assert "stdin is not a terminal" in result.stderr
    assert json.loads(result.stdout)["exit"] == 2
    assert events_of(research, "constraint.rebaseline") == []
    assert check(research)[0] == 1  # nothing was accepted


def test_rebaseline_with_nothing_changed_logs_nothing(research: Path) -> None:
    result = ckpt(research, "check", "--rebaseline", "t", "--json")
    doc = json.loads(result.stdout)
    assert doc["rebaseline"] == {"task": "t", "accepted": None, "event": None}
    assert events_of(research, "constraint.rebaseline") == []


def test_rebaseline_refuses_what_changed_after_it_was_shown(
    research: Path, person_at_terminal: None
) -> None:
    """What a person accepts is exactly what they saw."""
    import git_agentckpt
    from git_agentckpt.errors import ConflictError

    write(research / "data" / "raw" / "train.csv", "a,b\n1,2\n5,6\n")
    ck = git_agentckpt.open(str(research))
    task, shown = ck.pending_rebaseline("t")
    assert shown.changed == ("data/raw/train.csv",)
    write(research / "data" / "raw" / "late.csv", "written while the person read\n")
    with pytest.raises(ConflictError):
        ck.rebaseline(task, shown)
    assert check(research)[0] == 1


def test_the_python_facade_cannot_rebaseline_without_a_person(research: Path) -> None:
    import git_agentckpt
    from git_agentckpt.errors import UsageError

    write(research / "data" / "raw" / "train.csv", "a,b\n9,9\n")
    ck = git_agentckpt.open(str(research))
    task, shown = ck.pending_rebaseline("t")
    with pytest.raises(UsageError, match="needs a person at a terminal"):
        ck.rebaseline(task, shown)
    assert events_of(research, "constraint.rebaseline") == []
