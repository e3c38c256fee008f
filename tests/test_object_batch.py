"""A checkpoint's objects reach the disk as one pack (`git/object_batch.py`): the pack is
the one git itself would index, nothing names an object before it is on disk, and a
kill at any instant leaves a sound repository."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ckpt, ckpt_json, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import git_agentckpt
from git_agentckpt.daemon import watcher
from git_agentckpt.daemon.barrier import InProcess
from git_agentckpt.git import object_batch, packing, watch_view
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import run_git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def on_disk(repo: Path) -> tuple[int, list[str]]:
    """Loose objects, and the names of the packs that have an index."""
    objects = repo / ".git" / "objects"
    loose = sum(len(os.listdir(objects / d)) for d in os.listdir(objects) if len(d) == 2)
    packs = sorted(p.stem for p in (objects / "pack").glob("*.idx"))
    return loose, packs


def fsck(repo: Path) -> None:
    proc = subprocess.run(
        ["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "missing" not in proc.stdout


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bodies=st.lists(
        st.one_of(
            st.binary(max_size=40),
            # large bodies from a seed (hypothesis keeps its own inputs small), sizes on
            # both sides of each width of the entry header's size: 16, 2 KiB, 256 KiB
            st.builds(
                lambda size, seed: random.Random(seed).randbytes(size),
                st.one_of(
                    st.sampled_from([15, 16, 2047, 2048, 262_143, 262_144]),
                    st.integers(17, 300_000),
                ),
                st.integers(0, 2**32),
            ),
        ),
        min_size=1,
        max_size=12,
        unique=True,
    )
)
def test_the_pack_and_index_are_the_ones_git_makes(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[bytes]
) -> None:
    """Blobs of every size class (one to four size bytes in the entry header): git's own
    `index-pack` reads the pack and writes an index byte for byte equal to ours."""
    import hashlib

    where = tmp_path_factory.mktemp("pack")
    rows = []
    for body in bodies:
        raw = hashlib.sha1(b"blob %d\0" % len(body) + body).digest()
        rows.append((raw, 3, body))
    name = object_batch.write_pack(str(where), rows)
    pack, idx = where / f"{name}.pack", where / f"{name}.idx"
    theirs = where / "theirs.idx"
    subprocess.run(
        ["git", "index-pack", "-o", str(theirs), str(pack)], check=True, capture_output=True
    )
    assert theirs.read_bytes() == idx.read_bytes()
    listed = subprocess.run(
        ["git", "verify-pack", "-v", str(idx)], check=True, capture_output=True, text=True
    ).stdout
    assert f"non delta: {len(rows)} object" in listed
    assert oct(pack.stat().st_mode & 0o777) == oct(0o444)
    assert not [p for p in os.listdir(where) if p.startswith("tmp_")]


def test_a_batch_reaches_the_disk_as_one_pack_before_a_ref_names_it(repo: Path) -> None:
    r = GitRepo.discover(str(repo))
    before = on_disk(repo)
    with r.batched_objects():
        blobs = {f"f{i}": (r.write_blob(b"file %d\n" % i), 0o100644) for i in range(20)}
        sub = r.write_tree(blobs)
        top = r.write_tree({"sub": (sub, 0o040000)}, base=r.read_commit(r.head() or "").tree)
        commit = r.commit(top, [r.head() or ""], "batched\n")
        assert on_disk(repo) == before  # all in memory so far
        # ...and readable through the repository as if stored
        assert r.read_commit(commit).tree == top
        assert r.tree_entry(top, "sub/f7") == (blobs["f7"][0], 0o100644)
        assert r.cas_ref("refs/heads/batched", commit, None, "test")
        loose, packs = on_disk(repo)
        assert loose == before[0] and len(packs) == len(before[1]) + 1
    assert git(repo, "cat-file", "-p", "batched:sub/f7") == "file 7"
    assert git(repo, "rev-list", "--objects", "--count", "batched") != ""
    fsck(repo)


def test_git_run_inside_a_batch_sees_its_objects(repo: Path) -> None:
    r = GitRepo.discover(str(repo))
    with r.batched_objects():
        blob = r.write_blob(b"seen by git\n")
        # a git that reads objects gets them written first (`run.env_for`)
        shown = run_git(["cat-file", "-p", blob], cwd=str(repo)).stdout
    assert shown == b"seen by git\n"


def test_a_batch_keeps_its_pack_until_it_ends(repo: Path) -> None:
    """However few its objects, a batch writes one pack, kept (`.keep`, held open) from
    before the pack is in place until the batch ends: a concurrent `git repack -a -d`
    leaves it, and its unreachable objects stay."""
    r = GitRepo.discover(str(repo))
    loose, packs = on_disk(repo)
    pack_dir = repo / ".git" / "objects" / "pack"
    with r.batched_objects():
        blob = r.write_blob(b"a few objects\n")
        object_batch.flush_all()
        keeps = sorted(pack_dir.glob("*.keep"))
        assert on_disk(repo) == (loose, sorted([*packs, keeps[0].stem]))
        assert keeps[0].read_text().startswith("git ckpt: objects of a write in progress")
        git(repo, "repack", "-a", "-d", "-q")
        assert git(repo, "cat-file", "-t", blob) == "blob"  # unreachable, yet kept
    assert list(pack_dir.glob("*.keep")) == []
    git(repo, "repack", "-a", "-d", "-q")
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=repo).returncode != 0


def test_a_stamp_waits_for_the_objects_it_names(repo: Path) -> None:
    r = GitRepo.discover(str(repo))
    done: list[bool] = []
    object_batch.when_on_disk(lambda: done.append(True))  # nothing held: at once
    assert done == [True]
    with r.batched_objects():
        blob = r.write_blob(b"named by a stamp\n")
        object_batch.when_on_disk(lambda: done.append(r.exists(blob)))
        assert done == [True]
    assert done == [True, True]
    assert git(repo, "cat-file", "-t", blob) == "blob"


def test_packing_turned_off_writes_loose(repo: Path) -> None:
    git(repo, "config", "ckpt.packObjects", "false")
    ckpt(repo, "task", "start", "t", "--goal", "loose")
    for i in range(12):
        write(repo / "many" / f"f{i}.txt", f"{i}\n")
    ckpt(repo, "create", "-t", "t", "-m", "loose")
    assert on_disk(repo)[1] == []


@contextlib.contextmanager
def watched(repo: Path) -> Iterator[None]:
    """A work-tree watcher active in this process, as in a daemon child."""
    live = watcher.TreeWatcher(str(repo), str(repo / ".git" / "agent"))
    live.start()
    live.finish_walk()
    watch_view.activate(InProcess(live))
    try:
        yield
    finally:
        watch_view.activate(None)
        live.close()


def test_a_checkpoint_through_the_watcher_is_one_pack_and_restores(repo: Path) -> None:
    ck = git_agentckpt.open(str(repo))
    ck.task_start("t", goal="packed")
    with watched(repo):
        ck.create(task="t", message="the first snapshot scans in full", light=False)
        loose, packs = on_disk(repo)
        for i in range(15):
            write(repo / "many" / f"f{i}.txt", f"version one {i}\n")
        made = ck.create(task="t", message="one", light=False)
    now_loose, after = on_disk(repo)
    assert len(after) == len(packs) + 1
    assert now_loose - loose <= 4  # the event commits of this call, written loose
    log = watch_view.read_log(str(repo / ".git" / "agent"), 50)
    assert sum("full scan" in line for line in log) == 1  # only the first one
    for i in range(15):
        write(repo / "many" / f"f{i}.txt", "changed\n")
    ckpt(repo, "restore", made.commit)
    assert (repo / "many" / "f9.txt").read_text() == "version one 9\n"
    fsck(repo)


def test_packs_are_rolled_up(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packing, "MAX_PACKS", 4)
    ck = git_agentckpt.open(str(repo))
    ck.task_start("t", goal="many packs")
    most = 0
    with watched(repo):
        for n in range(12):
            for i in range(10):
                write(repo / "many" / f"f{i}.txt", f"round {n} file {i}\n")
            ck.create(task="t", message=f"c{n}", light=False)
            most = max(most, len(on_disk(repo)[1]))
    assert 3 <= most <= 5  # packs came, and each roll-up left a logarithmic number
    assert len(ckpt_json(repo, "list", "t")) == 13
    fsck(repo)


KILLED = """
import sys
from git_agentckpt.api import Checkpointer
from git_agentckpt.daemon import watcher
from git_agentckpt.daemon.barrier import InProcess
from git_agentckpt.git import watch_view
from pathlib import Path
root = Path(sys.argv[1])
ck = Checkpointer.open(str(root))
live = watcher.TreeWatcher(str(root), str(root / ".git" / "agent"))  # as the daemon
live.start()
live.finish_walk()
watch_view.activate(InProcess(live))
ck.create(task="k", message="the first snapshot scans in full", light=False)
for n in range(3):
    for i in range(12):
        (root / "many").mkdir(exist_ok=True)
        (root / "many" / f"f{i}.txt").write_text(f"kill round {n} {i}\\n")
    ck.create(task="k", message=f"k{n}", light=False)
"""


@pytest.mark.parametrize("nth", [2, 3])  # the first pack is the first checkpoint's
def test_a_kill_between_pack_and_index_leaves_a_sound_repository(repo: Path, nth: int) -> None:
    ckpt(repo, "task", "start", "k", "--goal", "killed")
    env = dict(os.environ, GIT_CKPT_CRASH_AT=f"objects.pack@{nth}")
    proc = subprocess.run([sys.executable, "-c", KILLED, str(repo)], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    # the killed checkpoint is not committed: the tip is the one before it, complete
    subject = git(repo, "log", "-1", "--format=%s", "refs/agent/checkpoints/k")
    assert subject.endswith("the first snapshot scans in full" if nth == 2 else ": k0")
    # the pack without its index is not one git reads: nothing names its objects
    orphans = [
        p
        for p in (repo / ".git" / "objects" / "pack").glob("*.pack")
        if not p.with_suffix(".idx").exists()
    ]
    assert len(orphans) == 1
    fsck(repo)
    left_doctor_removes_the_keep(repo, orphans[0].with_suffix(".keep"))
    shown = ckpt(repo, "verify").output
    assert "0 error(s), 0 warning(s)" in shown and "0 missing objects" in shown
    ckpt(repo, "create", "-t", "k", "-m", "after the kill")  # and work goes on
    fsck(repo)


def left_doctor_removes_the_keep(repo: Path, left: Path) -> None:
    """The killed writer left its pack kept (never repacked): `git ckpt doctor` removes
    that `.keep` once no process holds it; a `.keep` of the user's own stays."""
    assert left.read_text().startswith("git ckpt: objects of a write in progress")
    pack_dir = left.parent
    mine = pack_dir / ("pack-" + "0" * 40 + ".keep")
    mine.write_text("kept by hand\n")
    past = time.time() - 3600
    for path in pack_dir.iterdir():  # its temporary index too: long left
        os.utime(path, (past, past))
    doc = json.loads(ckpt(repo, "doctor", "--json").stdout)
    found = {os.path.basename(f["path"]): f for f in doc["findings"]}
    assert found[left.name]["action"] == "removed"
    assert found[left.name]["kind"] == "keep file of an unfinished checkpoint"
    assert not left.exists() and mine.exists() and mine.name not in found
    mine.unlink()


def test_fsync_object_files_syncs_the_pack(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`core.fsyncObjectFiles` (honoured for the loose objects a pack replaces): the pack,
    its index and the pack directory are synced; without it nothing is."""
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    r = GitRepo.discover(str(repo))
    with r.batched_objects():
        for i in range(8):
            r.write_blob(b"not synced %d\n" % i)
    assert synced == []
    git(repo, "config", "core.fsyncObjectFiles", "true")
    r = GitRepo.discover(str(repo))
    with r.batched_objects():
        for i in range(8):
            r.write_blob(b"synced %d\n" % i)
    assert len(synced) == 3  # the pack, its index, the directory
    fsck(repo)


WATCHED_CREATOR = """
import sys
from pathlib import Path
from git_agentckpt.api import Checkpointer
from git_agentckpt.daemon import watcher
from git_agentckpt.daemon.barrier import InProcess
from git_agentckpt.git import watch_view
root = Path(sys.argv[1])
ck = Checkpointer.open(str(root))
live = watcher.TreeWatcher(str(root), str(root / ".git" / "agent"))
live.start()
live.finish_walk()
watch_view.activate(InProcess(live))
for n in range(1000):
    for i in range(12):
        (root / "many").mkdir(exist_ok=True)
        (root / "many" / f"f{i}.txt").write_text(f"{sys.argv[2]} round {n} file {i}\\n")
    ck.create(task="k", message=f"k{n}", light=False)
"""


def test_kill_9_at_random_moments_of_packed_checkpoints(repo: Path, long_run: bool) -> None:
    """Checkpoints as the daemon makes them (one pack each), killed at random instants
    many times (`pytest --long`): every tip complete, `fsck --strict` clean, and work
    goes on after each kill."""
    if not long_run:
        pytest.skip("random kills loop many times: run with --long")
    ckpt(repo, "task", "start", "k", "--goal", "killed at random")
    rng = random.Random(5)
    tips: set[str] = set()
    for round_ in range(40):
        proc = subprocess.Popen(
            [sys.executable, "-c", WATCHED_CREATOR, str(repo), str(round_)],
            start_new_session=True,
        )
        time.sleep(rng.uniform(0.4, 1.5))  # the subject: a kill at a random instant
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        tip = git(repo, "rev-parse", "refs/agent/checkpoints/k")
        tips.add(tip)
        assert git(repo, "notes", "--ref=agent/state", "show", tip).startswith("{")
        git(repo, "cat-file", "-e", f"{tip}^{{tree}}")
        fsck(repo)
    assert len(tips) > 20  # the kills landed after many commits, not before the first
    orphans = [
        p
        for p in (repo / ".git" / "objects" / "pack").glob("*.pack")
        if not p.with_suffix(".idx").exists()
    ]
    shown = ckpt(repo, "verify").output
    # a kill between the ref move and its `checkpoint.commit` is a documented warning
    # (resume rolls it forward), never an error or a missing object
    assert " 0 error(s)" in shown and "0 missing objects" in shown, shown
    warned = [line for line in shown.splitlines() if line.startswith("warning:")]
    assert all("commit-event-missing" in line for line in warned), warned
    print(f"kills: 40, distinct tips: {len(tips)}, packs without an index: {len(orphans)}")
