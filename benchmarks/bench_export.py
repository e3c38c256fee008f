"""Cost of `git ckpt export` and `verify --dir` on a large checkpoint.

A repository of N small committed files (`bench_lib.make_repo`, default 10,000), a
task started on it (checkpoint 1) and a second checkpoint with 10 files changed.
Timed in-process, median of R rounds, each into a new directory:

- export of one checkpoint (CKPT): manifest with every file's sha256 (each blob read
  once: no digest is remembered between rounds), state, assertions, contracts;
- export of the whole task (2 checkpoints: the second reuses the first's digests);
- `verify --dir` of the working tree against the export (every file hashed, `git
  ls-files` for the extra files);
- for scale: `git ls-tree -r -l` of the same tree, and `git status --porcelain`.

With `--big-mib M`, a tracked file of M MiB is added: the peak memory (max RSS)
printed before and after shows that a large blob is streamed, not held whole.

    .venv/bin/python benchmarks/bench_export.py [--files N] [--rounds R] [--big-mib M]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_lib import make_repo, seal_environment


def median_ms(fn: Callable[[int], object], rounds: int) -> float:
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--big-mib", type=int, default=0, help="add a tracked file of M MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-export-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        repo = make_repo(root, args.files)
        if args.big_mib:
            with open(repo / "big.bin", "wb") as fh:
                for i in range(args.big_mib):
                    fh.write(bytes([i % 251]) * (1 << 20))
            subprocess.run(["git", "add", "big.bin"], cwd=repo, check=True)
            subprocess.run(["git", "commit", "-qm", "big"], cwd=repo, check=True)

        import git_agentckpt
        from git_agentckpt.api import verify_dir

        ck = git_agentckpt.open(str(repo))
        ck.task_start("bench", "export benchmark")
        for i in range(10):
            (repo / f"d{i:02d}/s0/f{i:06d}.txt").write_text(f"changed {i}\n")
        second = ck.create("bench", message="ten files changed")
        out = root / "out"
        rss_before = max_rss_mib()

        def export_one(i: int) -> None:
            ck.export(second.id, str(out / f"one-{i}"))

        def export_task(i: int) -> None:
            ck.export("bench", str(out / f"task-{i}"))

        rows = {
            "export CKPT (1 checkpoint)": median_ms(export_one, args.rounds),
            "export TASK (2 checkpoints)": median_ms(export_task, args.rounds),
        }
        rss_after = max_rss_mib()
        result = verify_dir(str(repo), str(out / "task-0"))
        assert result.ok, result.differences[:5]
        rows["verify --dir (whole tree hashed)"] = median_ms(
            lambda i: verify_dir(str(repo), str(out / "task-0")), args.rounds
        )
        tree = second.tree
        rows["git ls-tree -r -l (for scale)"] = median_ms(
            lambda i: subprocess.run(
                ["git", "ls-tree", "-r", "-l", tree], cwd=repo, capture_output=True, check=True
            ),
            args.rounds,
        )
        rows["git status --porcelain (for scale)"] = median_ms(
            lambda i: subprocess.run(
                ["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True
            ),
            args.rounds,
        )
        size = sum(p.stat().st_size for p in (out / "one-0").rglob("*") if p.is_file())
        print(
            f"export on {args.files:,} files"
            + (f" + one {args.big_mib} MiB file" if args.big_mib else "")
            + f", python {sys.version.split()[0]}, median of {args.rounds}"
        )
        for name, ms in rows.items():
            print(f"  {name:40s} {ms:9.1f} ms")
        print(f"  one-checkpoint export size               {size / 1024:9.1f} KiB")
        print(f"  max RSS before / after the exports      {rss_before:6.1f} / {rss_after:.1f} MiB")
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
