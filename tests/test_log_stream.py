"""`git ckpt log` streams (issue 12): events come out as their commits are read, `-n N`
reads N commits, a damaged line is skipped with a warning (the rest still prints), and
resume reads only the tool's own events, from an index that grows with the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, walked

import git_agentckpt
from git_agentckpt.model import NewEvent, dumps
from git_agentckpt.paths import json_safe
from git_agentckpt.store import log_stream
from git_agentckpt.store.log_index import is_key_event, key_events
from git_agentckpt.store.refs import TaskName


def start(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one", "--step", "s2:two")


def calls(repo: Path, n: int, batch: int = 1) -> None:
    log = git_agentckpt.open(str(repo)).log
    for i in range(0, n, batch):
        log.append(
            TaskName("t"),
            [NewEvent("tool.call", input={"i": i + k}, output="ok") for k in range(batch)],
        )


def test_log_json_is_every_event_as_stored_in_order(repo: Path) -> None:
    start(repo)
    calls(repo, 6, batch=3)  # batches: several events per commit
    ck = git_agentckpt.open(str(repo))
    ck.event("t", "file.write", {"path": "caf\udce9.txt", "note": "a name that is not UTF-8"})
    ck.event("t", "note", {"text": 'quotes " and \\ and \n newlines, ünïcödé'})
    expected = [
        json.dumps(
            json_safe(e.to_json()), separators=(",", ":"), ensure_ascii=False, sort_keys=True
        )
        for e in ck.log.read(TaskName("t"))
    ]
    assert ckpt(repo, "log", "t", "--json").stdout.splitlines() == expected
    text = ckpt(repo, "log", "t").stdout.splitlines()
    heads = [x for x in text if not x.startswith(" " * 31)]  # a second line: the details
    assert heads == [
        f"{e.seq:>5}  {e.ts}  {e.summary().split(' ', 1)[1]}" for e in ck.log.read(TaskName("t"))
    ]
    first_call = next(x for x in heads if x.endswith("tool.call"))
    assert text[text.index(first_call) + 1] == " " * 31 + 'in: {"i": 0} | out: ok'
    assert ckpt(repo, "log", "t", "-n", "2", "--json").stdout.splitlines() == expected[-2:]


def test_log_n_reads_only_n_commits(repo: Path) -> None:
    start(repo)
    calls(repo, 300)
    with walked() as seen:
        out = ckpt(repo, "log", "t", "-n", "3").stdout.splitlines()
    heads = [x for x in out if not x.startswith(" " * 31)]
    assert len(heads) == 3 and len(out) == 6 and len(seen) <= 4


def test_the_log_is_a_stream_not_a_list(repo: Path) -> None:
    """Taking the first event parses one commit, not the whole log."""
    start(repo)
    calls(repo, 200)
    parsed: list[str] = []
    real = log_stream._entries

    def counting(info: Any, warn: Any) -> Any:
        parsed.append(info.id)
        return real(info, warn)

    log_stream._entries = counting
    try:
        entries = git_agentckpt.open(str(repo)).log_entries("t")
        first = next(iter(entries))
        assert first.event.type == "task.start" and len(parsed) == 1
    finally:
        log_stream._entries = real


def test_a_damaged_line_is_skipped_with_a_warning(repo: Path) -> None:
    """Another writer (or a fetch) left a commit whose body is not JSON, and one whose
    event is not an event: the log prints every other event and names them once."""
    start(repo)
    calls(repo, 2)
    tip = git(repo, "rev-parse", "refs/agent/events/t")
    empty = git(repo, "hash-object", "-t", "tree", "-w", "--stdin", input="")
    bad = git(repo, "commit-tree", empty, "-p", tip, "-m", "x", "-m", '{"v":1,"id":"x", broken')
    odd = git(repo, "commit-tree", empty, "-p", bad, "-m", "y", "-m", '{"v":2,"id":"z"}')
    git(repo, "update-ref", "refs/agent/events/t", odd, tip)
    calls(repo, 1)
    result = ckpt(repo, "log", "t", "--json")
    types = [json.loads(x)["type"] for x in result.stdout.splitlines()]
    assert types.count("tool.call") == 3 and types[0] == "task.start"
    warnings = [x for x in result.stderr.splitlines() if x.startswith("git ckpt: warning:")]
    assert len(warnings) == 2, result.stderr
    assert bad[:12] in warnings[0] and "skipped" in warnings[0] and odd[:12] in warnings[1]


def test_the_index_is_the_key_events_of_a_full_read(repo: Path) -> None:
    start(repo)
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")
    for round_ in range(3):
        calls(repo, 5)
        ck.event("t", "model.quota", {"error": "quota exceeded"})
        ck.step_start("t", "s1")
        ck.create("t", message=f"c{round_}", light=round_ % 2 == 0)
        full = [e for e in ck.log.read(t) if is_key_event(e)]
        assert [dumps(e.to_json()) for e in key_events(ck.log, t)] == [
            dumps(e.to_json()) for e in full
        ]
    tip = git(repo, "rev-parse", "refs/agent/events/t")
    git(repo, "update-ref", "refs/agent/events/t", tip + "~4")  # rewound: built again
    full = [e for e in ck.log.read(t) if is_key_event(e)]
    assert [e.id for e in key_events(ck.log, t)] == [e.id for e in full]


def test_resume_reads_only_the_new_commits_of_a_long_log(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    calls(repo, 400)
    ck = git_agentckpt.open(str(repo))
    ck.resume("t")
    calls(repo, 30)
    with walked() as seen:
        outcome = git_agentckpt.open(str(repo)).resume("t")
    assert outcome.brief is not None
    assert len(seen) < 150, len(seen)  # the new commits (and the brief's last 10 calls)
    work = outcome.brief.data["recent_work"]
    assert isinstance(work, list) and len(work) == 10
    assert all("tool.call" in str(w) for w in work) and '"i": 29' in str(work[-1])


def test_the_whole_log_is_read_newest_first_and_printed_oldest_first(
    repo: Path, monkeypatch: Any
) -> None:
    """`log TASK` reads the log as git streams it (newest first) and gives it back in
    order through a spool: with tiny blocks and a spool that moves to a file at once, it
    prints what reading back from the tip (`-n`) and reading oldest first
    (`log_entries`) give, and the warnings in log order."""
    from git_agentckpt.store import log_spool

    start(repo)
    calls(repo, 20, batch=3)
    tip = git(repo, "rev-parse", "refs/agent/events/t")
    empty = git(repo, "hash-object", "-t", "tree", "-w", "--stdin", input="")
    bad = git(repo, "commit-tree", empty, "-p", tip, "-m", "x", "-m", "{broken}")
    odd = git(repo, "commit-tree", empty, "-p", bad, "-m", "y", "-m", '{"v":2,"id":"z"}')
    git(repo, "update-ref", "refs/agent/events/t", odd, tip)
    calls(repo, 7)
    monkeypatch.setattr(log_spool, "BLOCK", 4)
    monkeypatch.setattr(log_spool, "MEMORY", 100)
    for args in (["--json"], []):
        whole = ckpt(repo, "log", "t", *args)
        assert whole.stdout == ckpt(repo, "log", "t", "-n", "1000", *args).stdout
        warnings = [x for x in whole.stderr.splitlines() if "warning" in x]
        assert len(warnings) == 2 and bad[:12] in warnings[0] and odd[:12] in warnings[1]
    forward = [e.json_line() for e in git_agentckpt.open(str(repo)).log_entries("t")]
    assert ckpt(repo, "log", "t", "--json").stdout.splitlines() == forward


def test_since_a_checkpoint_named_twice_shows_from_the_first(repo: Path) -> None:
    """A log holding a checkpoint's prepare event twice (a careless writer): `--since`
    shows from the first, read newest first or back from the tip alike."""
    start(repo)
    calls(repo, 3)
    made = git_agentckpt.open(str(repo)).create("t", message="mid")
    calls(repo, 3)
    prepare = next(
        x
        for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()
        if '"checkpoint.prepare"' in x and made.commit in x
    )
    again = json.loads(prepare) | {"id": "01AGAIN", "seq": 99}
    tip = git(repo, "rev-parse", "refs/agent/events/t")
    empty = git(repo, "hash-object", "-t", "tree", "-w", "--stdin", input="")
    forged = git(repo, "commit-tree", empty, "-p", tip, "-m", "again", "-m", dumps(again))
    git(repo, "update-ref", "refs/agent/events/t", forged, tip)
    calls(repo, 2)
    shown = ckpt(repo, "log", "t", "--json", "--since", made.id).stdout.splitlines()
    assert shown[0] == prepare and len(shown) == 2 + 3 + 1 + 2  # prepare, commit: 2
    only_calls = ckpt(repo, "log", "t", "--json", "--since", made.id, "--type", "tool.")
    assert len(only_calls.stdout.splitlines()) == 3 + 2


def test_the_index_file_reads_back_whole_and_a_bad_one_is_rebuilt(repo: Path) -> None:
    """Read through its file, as a new process reads it: the same events, text beyond
    ASCII included; a file whose digest holds but whose records are not events (or an
    older format) is built again from the log."""
    from git_agentckpt.sealed import read_sealed, write_sealed
    from git_agentckpt.store import log_index

    start(repo)
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")
    ck.event("t", "model.quota", {"error": "quota dépassé ✓", "raw": "caf\udce9"})
    ck.create("t", message="c1", light=True)

    def from_file() -> list[str]:
        log_index._memo.clear()
        return [dumps(e.to_json()) for e in key_events(ck.log, t)]

    full = [dumps(e.to_json()) for e in ck.log.read(t) if is_key_event(e)]
    assert from_file() == full
    assert from_file() == full  # now from the file the first call wrote
    path = log_index._path(ck.log, t)
    raw = read_sealed(path)
    assert raw is not None and raw.isascii() and '"v":4' in raw
    broken = raw.replace('"type":"', '"type":7,"was":"', 1)
    write_sealed(path, broken)  # digest right, a record wrong
    assert from_file() == full
    write_sealed(path, raw.replace('"v":4', '"v":3', 1))  # an older format
    assert from_file() == full
    assert read_sealed(path) == raw  # written again as it was
    stop = next(i for i, e in enumerate(key_events(ck.log, t)) if e.type == "model.quota")
    assert f'"stop":{stop},' in raw  # the quota is the last stop signal
    forged = raw.replace(f'"stop":{stop},', f'"stop":{stop - 1},', 1)
    write_sealed(path, forged)  # digest right, pointing at an event that is not a stop
    assert from_file() == full
    assert read_sealed(path) == raw


def test_the_last_stop_signal_comes_from_the_index_as_a_walk_finds_it(repo: Path) -> None:
    """The brief's "last stop" (context.budget) is kept by the index as the log grows, and
    equals the newest stop signal a walk of the whole log finds."""
    from git_agentckpt.model import is_stop_signal
    from git_agentckpt.store import log_index

    start(repo)
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")

    def walked() -> str | None:
        stops = [e.id for e in ck.log.read(t) if is_stop_signal(e)]
        return stops[-1] if stops else None

    def indexed() -> str | None:
        found = log_index.last_stop_signal(ck.log, t)
        return None if found is None else found.id

    assert indexed() is None and walked() is None
    for i, kind in enumerate(("model.quota", "tool.call", "api.rate_limit", "tool.call")):
        ck.event("t", kind, {"error": f"stop {i}"} if kind != "tool.call" else {"input": i})
        ck.create("t", message=f"c{i}", light=True)
        assert indexed() == walked()
        log_index._memo.clear()  # as a new process reads it: from the file
        assert indexed() == walked()
    outcome = ck.resume("t")
    assert outcome.brief is not None
    brief = outcome.brief.markdown
    assert "api.rate_limit" in brief and "stop 2" in brief


def test_the_agents_last_events_come_from_the_index_as_a_walk_gives_them(repo: Path) -> None:
    """The brief's last events of the agent: kept in the index (a run of resumes adds only
    the tool's events, and a walk back through them grew with each), equal to a walk."""
    from git_agentckpt.model import is_tool_only
    from git_agentckpt.store import log_index
    from git_agentckpt.store.log_index import OWN_KEPT, last_own_events

    start(repo)
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")

    def walked(n: int) -> list[str]:
        own = [e.id for e in ck.log.read(t) if not is_tool_only(e.type)]
        return own[-n:]

    for round_ in range(4):
        calls(repo, 7 if round_ % 2 == 0 else 40)
        ck.resume("t")
        ck.resume("t")  # only the tool's events between these two
        for n in (1, 10, OWN_KEPT):
            log_index._memo.clear()  # as a new process reads it: from the file
            assert [e.id for e in last_own_events(ck.log, t, n)] == walked(n), (round_, n)
    assert [e.id for e in last_own_events(ck.log, t, OWN_KEPT + 5)] == walked(OWN_KEPT + 5)


def test_a_resume_writes_the_index_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume reads the key-event index three times while it appends events (here: a
    restore's); the file is written once, when it ends (`log_index.writes_deferred`),
    as of its last read (the events logged after it are added by the next read)."""
    from git_agentckpt.sealed import read_sealed, write_sealed
    from git_agentckpt.store import log_index

    start(repo)
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")
    calls(repo, 5)
    ck.resume("t")
    path = log_index._path(ck.log, t)
    written: list[str] = []
    real = write_sealed

    def counting(where: str, payload: str) -> None:
        if where == path:
            written.append(payload)
        real(where, payload)

    monkeypatch.setattr(log_index, "write_sealed", counting)
    (repo / "README.md").write_text("drifted\n")  # restored: the log grows mid-resume
    ck.resume("t", restore=True)
    assert len(written) == 1
    log_index._memo.clear()  # as a new process reads it: from the file
    raw = read_sealed(path)
    assert raw is not None
    tip = json.loads(raw)["tip"]
    git(repo, "merge-base", "--is-ancestor", tip, "refs/agent/events/t")
    assert [e.id for e in key_events(ck.log, t)] == [
        e.id for e in ck.log.read(t) if is_key_event(e)
    ]
