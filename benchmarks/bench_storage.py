"""Storage of a long task: bytes on disk per checkpoint against the changed bytes, loose
objects left behind, and the time each way of packing adds to a checkpoint.

Two workloads, each run once per option on a fresh copy of the same repository:

- `full`: N checkpoints, each after rewriting `--changed` files (`--file-size` bytes of
  text each, new content every time: the changed bytes);
- `events`: `--events` commits of the event log, every 10th a light checkpoint.

Options:

- `loose`   objects stay loose until someone runs `git gc` (before this change);
- `pack-each` after each checkpoint the loose objects go into one pack
            (`git/packing.py`: `pack-objects --window=0`, the loose copies removed,
            geometric roll-up past 50 packs); the time is the packing step, in the
            foreground;
- `pack-128` the same once 128 objects are loose (the default: every ~3 checkpoints;
            counted at each checkpoint and every 256th event);
- `gc-auto` `git gc --auto` every `--gc-every` checkpoints, started in the background
            (never waited for; git's own thresholds: 6700 loose objects, 50 packs);
            the time is the foreground spawn, and the background run is reported apart;
- `watcher` as the daemon checkpoints: the work-tree watcher on, so the snapshot's
            blobs and trees are written by the tool and reach the disk with the commit
            and notes as one pack per checkpoint (`git/object_batch.py`), then
            `pack-128` for what is left loose (the event commits), after the answer
            (the time is that step: `after_reply.run_queued`).

Bytes on disk are allocated blocks (`st_blocks`) under `.git/objects`, minus those of
the repository before the workload; "after gc" is after `git gc --prune=now`.

    .venv/bin/python benchmarks/bench_storage.py                # 2,000 files, 100 ckpts
    .venv/bin/python benchmarks/bench_storage.py --checkpoints 30 --events 300   # quick
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lib import git, seal_environment

OPTIONS = ("loose", "pack-each", "pack-128", "gc-auto", "watcher")
WORDS = ("the", "of", "model", "train", "data", "loss", "step", "seed", "batch", "epoch", "run")


def text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        line = " ".join(rng.choice(WORDS) for _ in range(8)) + f" {rng.random():.6f}\n"
        out.append(line)
        n += len(line)
    return "".join(out)[:size]


def make_template(root: Path, n_files: int, file_size: int) -> Path:
    repo = root / "template"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    rng = random.Random(7)
    for i in range(n_files):
        path = repo / f"d{i % 50:02d}" / f"s{(i // 50) % 8}" / f"f{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text(rng, file_size if i % 10 == 0 else 400))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial tree")
    git(repo, "gc", "-q", "--prune=now")
    return repo


def disk_bytes(objects: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(objects):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def loose_count(objects: Path) -> int:
    return sum(
        len(os.listdir(objects / d))
        for d in os.listdir(objects)
        if len(d) == 2 and (objects / d).is_dir()
    )


def pack_count(objects: Path) -> int:
    return sum(1 for n in os.listdir(objects / "pack") if n.endswith(".pack"))


@dataclass
class Background:
    """`git gc --auto` runs started in the background; their wall time, once done."""

    runs: list[float] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self, repo: Path) -> None:
        started = time.perf_counter()
        proc = subprocess.Popen(
            ["git", "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"],
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

        def wait() -> None:
            proc.wait()
            self.runs.append(time.perf_counter() - started)

        t = threading.Thread(target=wait, daemon=True)
        t.start()
        self.threads.append(t)

    def join(self) -> None:
        for t in self.threads:
            t.join()


@dataclass
class Outcome:
    workload: str
    option: str
    count: int  # checkpoints (full) or commits (events)
    changed: int  # bytes of new file content
    disk: int  # bytes on disk added, before gc
    disk_gc: int  # after git gc --prune=now
    loose: int
    packs: int
    create_ms: float  # median time of one create / event call
    added_ms: float  # median time the option adds to it, in the foreground
    added_mean_ms: float  # the same, mean (packing once every few checkpoints)
    background_s: float = 0.0
    fsck_ok: bool = True


def run_workload(
    template: Path, work: Path, workload: str, option: str, args: argparse.Namespace
) -> Outcome:
    import git_agentckpt
    from git_agentckpt.git import packing
    from git_agentckpt.store.workspace import EVENTS_PER_PACK_CHECK

    repo = work / f"{workload}-{option}"
    shutil.copytree(template, repo, symlinks=True)
    git(repo, "config", "ckpt.packObjects", "false")  # the step is timed apart below
    objects = repo / ".git" / "objects"
    ck = git_agentckpt.open(str(repo))
    ck.task_start("t", "storage benchmark")
    live = None
    if option == "watcher":
        from git_agentckpt import after_reply
        from git_agentckpt.daemon import watcher
        from git_agentckpt.daemon.barrier import InProcess
        from git_agentckpt.git import watch_view

        git(repo, "config", "ckpt.packObjects", "true")
        live = watcher.TreeWatcher(str(repo), str(repo / ".git" / "agent"))
        live.start()
        live.finish_walk()
        watch_view.activate(InProcess(live))
        after_reply.defer_in_this_process()
        ck.create("t", message="the first snapshot scans in full")
        after_reply.run_queued()
    base_disk = disk_bytes(objects)
    rng = random.Random(11)
    background = Background()
    create_times: list[float] = []
    added: list[float] = []
    changed = 0
    count = args.checkpoints if workload == "full" else args.events
    files = sorted(p for p in repo.rglob("f*.txt") if ".git" not in p.parts)
    for i in range(count):
        is_checkpoint = workload == "full" or i % 10 == 9
        t0 = time.perf_counter()
        if workload == "full":
            for path in rng.sample(files, args.changed):
                content = text(rng, args.file_size)
                path.write_text(content)
                changed += len(content)
            t0 = time.perf_counter()
            ck.create("t", message=f"ckpt {i}")
        elif is_checkpoint:
            ck.create("t", message=f"light {i}", light=True)
        else:
            payload = {"input": f"pytest -q tests/test_{i % 50}.py", "output": "ok"}
            seq = ck.event("t", "tool.call", payload).seq
        create_times.append(time.perf_counter() - t0)
        if not is_checkpoint:
            if option == "pack-128" and seq % EVENTS_PER_PACK_CHECK == 0:  # as append_events
                t1 = time.perf_counter()
                packing.pack_loose(ck.repo, min_objects=128)
                added.append(time.perf_counter() - t1)
            continue
        t1 = time.perf_counter()
        if option == "watcher":
            after_reply.run_queued()
        elif option == "pack-each":
            packing.pack_loose(ck.repo, min_objects=1)
        elif option == "pack-128":
            packing.pack_loose(ck.repo, min_objects=128)
        elif option == "gc-auto" and (len(create_times) % args.gc_every == 0):
            background.start(repo)
        if option != "loose":
            added.append(time.perf_counter() - t1)
    background.join()
    if live is not None:
        watch_view.activate(None)
        live.close()
        after_reply.stop_deferring()
    disk, loose, packs = disk_bytes(objects) - base_disk, loose_count(objects), pack_count(objects)
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo, capture_output=True)
    git(repo, "gc", "-q", "--prune=now")
    disk_gc = disk_bytes(objects) - base_disk
    shutil.rmtree(repo)
    return Outcome(
        workload,
        option,
        count,
        changed,
        disk,
        disk_gc,
        loose,
        packs,
        statistics.median(create_times) * 1000,
        statistics.median(added) * 1000 if added else 0.0,
        statistics.mean(added) * 1000 if added else 0.0,
        sum(background.runs),
        fsck.returncode == 0,
    )


def _x(nbytes: int, r: Outcome) -> str:
    return f"{nbytes / r.changed:.2f}×" if r.changed else "–"


def table(rows: list[Outcome], args: argparse.Namespace) -> str:
    out = [
        f"Storage of a long task: {args.files} files; `full` = {args.checkpoints} checkpoints "
        f"of {args.changed} rewritten files of {args.file_size} B; `events` = {args.events} "
        "event commits, every 10th a light checkpoint.",
        "",
        "| workload | option | disk/ckpt before gc | ×changed | disk/ckpt after gc | ×changed "
        "| loose left | packs | create (median) | added/ckpt median / mean "
        "| background gc | fsck |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = r.count if r.workload == "full" else max(1, r.count // 10)
        out.append(
            f"| {r.workload} | {r.option} | {r.disk / per / 1024:.1f} KiB | {_x(r.disk, r)} "
            f"| {r.disk_gc / per / 1024:.1f} KiB | {_x(r.disk_gc, r)} | {r.loose} | {r.packs} "
            f"| {r.create_ms:.1f} ms | {r.added_ms:.1f} / {r.added_mean_ms:.1f} ms "
            f"| {r.background_s:.1f} s "
            f"| {'clean' if r.fsck_ok else 'ERRORS'} |"
        )
    out.append("")
    out.append(
        "disk/ckpt: bytes on disk added per checkpoint (events: per light checkpoint, i.e. "
        "per 10 commits); ×changed: against the bytes of new file content."
    )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--file-size", type=int, default=8192)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--gc-every", type=int, default=10)
    parser.add_argument("--options", default=",".join(OPTIONS))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-storage-"))
    try:
        seal_environment(root)
        template = make_template(root, args.files, args.file_size)
        rows = []
        for workload in ("full", "events"):
            for option in args.options.split(","):
                print(f"[bench] {workload} / {option}", file=sys.stderr, flush=True)
                rows.append(run_workload(template, root, workload, option, args))
        print(table(rows, args))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
