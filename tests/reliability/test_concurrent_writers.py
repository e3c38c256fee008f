"""Concurrent writers lose nothing (issue 9, "Prove it").

- 8 processes append events to one task at once: none lost, none duplicated,
  `seq` numbers 1..N without a gap;
- 20 processes start 20 tasks at once: every task exists and is complete, and
  the shared notes ref holds the state of each;
- two clones push to one bare remote (a path, and `git daemon` on 127.0.0.1)
  in a loop, at once: every event either acknowledged ends up in both clones and
  in the remote, and the three agree.

Every racer starts on a pipe gate (`helpers.Gate`), never on a clock. Counts are
small by default; `pytest --long` runs the sizes the issue names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import test_share
from conftest import git
from helpers import Gate
from store_checks import check_store, logged_events, run_ckpt, tasks_of

import git_agentckpt

# the fixtures of tests/test_share.py: a bare remote and two clones; git daemon on it
clones = test_share.clones
daemon = test_share.daemon
Recorder = Callable[[str, object], None]


def start_racers(script: str, argvs: list[list[str]]) -> list[subprocess.Popen[str]]:
    """One process per argv, all held at one gate, then let go together."""
    gate = Gate()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(gate.fd), *argv],
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=gate.fds,
        )
        for argv in argvs
    ]
    gate.open(procs)
    return procs


def results(procs: list[subprocess.Popen[str]]) -> list[Any]:
    """Each racer's last output line, as JSON (after it exited 0)."""
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"a racer exited {proc.returncode}"
        out.append(json.loads(stdout.splitlines()[-1]))
    return out


APPENDER = """
import json, os, sys
import git_agentckpt
ck = git_agentckpt.open(sys.argv[2])
worker, count = sys.argv[3], int(sys.argv[4])
print("ready", flush=True)
os.read(int(sys.argv[1]), 1)
ids = []
for i in range(count):
    ev = ck.append_events("shared", [{"type": "tool.call", "input": {"w": worker, "i": i}}])
    ids.append(ev[0].id)
print(json.dumps(ids))
"""


def test_8_processes_append_to_one_task_none_lost(repo: Path, long_run: bool) -> None:
    workers, each = 8, (500 if long_run else 60)
    procs = start_racers(APPENDER, [[str(repo), str(w), str(each)] for w in range(workers)])
    acknowledged = {i for ids in results(procs) for i in ids}
    total = workers * each
    assert len(acknowledged) == total
    events = git_agentckpt.open(str(repo)).events("shared")
    assert [e.seq for e in events] == list(range(1, total + 1))  # no gap, no repeat
    assert {e.id for e in events} == acknowledged  # none lost, none extra
    seen = sorted((str(e.input["w"]), int(e.input["i"])) for e in events)
    assert seen == sorted((str(w), i) for w in range(workers) for i in range(each))
    assert len(logged_events(repo, "shared")) == total  # plain git sees the same, once each
    check_store(repo)


STARTER = """
import json, os, sys
import git_agentckpt
ck = git_agentckpt.open(sys.argv[2])
task = sys.argv[3]
print("ready", flush=True)
os.read(int(sys.argv[1]), 1)
made = ck.task_start(task, f"goal of {task}", [("s1", "one")])
print(json.dumps(made.commit))
"""


def test_20_tasks_started_at_once_all_exist_and_are_complete(repo: Path) -> None:
    names = [f"task-{n:02d}" for n in range(20)]
    procs = start_racers(STARTER, [[str(repo), name] for name in names])
    commits = dict(zip(names, results(procs), strict=True))
    assert sorted(tasks_of(repo)) == names
    held = check_store(repo)  # every chain complete: commit, state note, prepare
    for name, commit in commits.items():
        assert held.checkpoints[name] == {commit}
        note = json.loads(git(repo, "notes", "--ref=agent/state", "show", commit))
        assert note["task"] == name and note["goal"] == f"goal of {name}"
    ck = git_agentckpt.open(str(repo))
    assert sorted(t.name for t in ck.tasks()) == names
    for name in names:
        assert ck.state(name)["goal"] == f"goal of {name}"


PUSHER = """
import json, os, sys
import git_agentckpt
from git_agentckpt.errors import ConflictError
ck = git_agentckpt.open(sys.argv[2])
url, me, rounds = sys.argv[3], sys.argv[4], int(sys.argv[5])
ck.task_start(f"own-{me}", f"the task of {me} alone")
print("ready", flush=True)
os.read(int(sys.argv[1]), 1)
acked, refused = [], 0
for i in range(rounds):
    acked.append(ck.append_events("t", [{"type": "tool.call", "input": {"who": me, "i": i}}])[0].id)
    if i % 3 == 0:
        ck.create(f"own-{me}", light=True, message=f"{me} {i}")
    for _ in range(20):  # `push` says: nothing was lost, run it again
        try:
            ck.push(url)
            break
        except ConflictError:
            refused += 1
    else:
        raise SystemExit(f"{me}: 20 pushes in a row refused")
print(json.dumps({"acked": acked, "refused": refused}))
"""


def two_clones_push_in_a_loop(
    clones: tuple[Path, Path, Path], url: str, rounds: int
) -> dict[str, int]:
    remote, a, b = clones
    git_agentckpt.open(str(a)).task_start("t", "shared by two clones", [("s1", "one")])
    assert run_ckpt(a, ("push", url)).returncode == 0
    assert run_ckpt(b, ("fetch", url)).returncode == 0
    procs = start_racers(PUSHER, [[str(c), url, c.name, str(rounds)] for c in (a, b)])
    done = results(procs)
    acked = {i for r in done for i in r["acked"]}
    for clone, command in ((a, "push"), (b, "push"), (a, "fetch")):
        proc = run_ckpt(clone, (command, url))
        assert proc.returncode == 0, proc.stderr
    shared = ("refs/agent/", "refs/notes/agent/")
    refs = [git(r, "for-each-ref", *shared) for r in (a, b, remote)]
    assert refs[0] == refs[1] == refs[2], "the clones and the remote disagree"
    for repo in (a, b, remote):
        ids = [str(e["id"]) for e in logged_events(repo, "t")]
        assert acked <= set(ids), f"{len(acked - set(ids))} acknowledged event(s) missing"
        check_store(repo)
        assert {"t", "own-a", "own-b"} <= set(tasks_of(repo))
    for clone in (a, b):  # the tool reads each event once, whatever the merges
        events = git_agentckpt.open(str(clone)).events("t")
        assert len({e.id for e in events}) == len(events)
        assert {e.id for e in events if e.type == "tool.call"} == acked
    return {"events": len(acked), "refused pushes": sum(r["refused"] for r in done)}


def test_two_clones_pushing_to_one_bare_remote(
    clones: tuple[Path, Path, Path], long_run: bool, record_property: Recorder
) -> None:
    figures = two_clones_push_in_a_loop(clones, str(clones[0]), 60 if long_run else 8)
    record_property("figures", json.dumps(figures))  # --junitxml keeps them


def test_two_clones_pushing_over_git_daemon(
    clones: tuple[Path, Path, Path], daemon: str, long_run: bool, record_property: Recorder
) -> None:
    figures = two_clones_push_in_a_loop(clones, daemon, 60 if long_run else 8)
    record_property("figures", json.dumps(figures))
