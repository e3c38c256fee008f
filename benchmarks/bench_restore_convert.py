"""Restore of 1,000 files, with and without git's conversion (filters, line endings).

Restore writes the bytes `git checkout` would (issue 11, item 2): a blob is
converted through git's own conversion for its path when an attribute or
`core.autocrlf` asks for it, in one `git cat-file --batch --filters` process
for the whole restore; when nothing applies (the common case) no process runs
at all. This measures what that costs, on four shapes of the same 1,000-file
tree (40 directories of 25 files):

- plain: no `.gitattributes`, no autocrlf (no conversion process);
- eol=crlf: `* text eol=crlf` in `.gitattributes`;
- autocrlf: `core.autocrlf=true`;
- filter: `*.txt filter=rot13` (a `tr` smudge/clean pair).

Each round rewrites every file, then restores the checkpoint taken before
(in-process `Workspace.restore`; the rewritten tree is known after round one,
so no safety checkpoint is taken after it), and separately times the write
itself (`apply_restore` of the same plan), the conversion alone (`checkout_bytes` of
every file, read back, nothing written), and git's own `git checkout HEAD -- .` of the
same rewritten files for reference. Medians in milliseconds.

    .venv/bin/python benchmarks/bench_restore_convert.py [--files 1000] [--rounds 7]
        [--shapes plain,eol=crlf,autocrlf,filter]

The code before this change has no conversion: run the same script with
PYTHONPATH pointing at a checkout of it for the "before" figures.

Not a test: pytest never collects these files (`bench_*.py`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_lib import seal_environment

SHAPES = ("plain", "eol=crlf", "autocrlf", "filter")
ROT13 = "tr A-Za-z N-ZA-Mn-za-m"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root: Path, shape: str, files: int) -> Path:
    repo = root / shape.replace("=", "-")
    repo.mkdir()
    _git(repo, "init", "-q")
    if shape == "eol=crlf":
        (repo / ".gitattributes").write_text("* text eol=crlf\n")
    elif shape == "autocrlf":
        _git(repo, "config", "core.autocrlf", "true")
    elif shape == "filter":
        (repo / ".gitattributes").write_text("*.txt filter=rot13\n")
        _git(repo, "config", "filter.rot13.clean", ROT13)
        _git(repo, "config", "filter.rot13.smudge", ROT13)
    for i in range(files):
        path = repo / f"d{i % 40:02d}" / f"f{i:05d}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"line one of {i}\nline two\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "tree")
    return repo


def rewrite(repo: Path, files: int, round_: int) -> None:
    for i in range(files):
        (repo / f"d{i % 40:02d}" / f"f{i:05d}.txt").write_text(f"changed {round_}\n")


def git_checkout(repo: Path, files: int, rounds: int) -> float:
    """The reference: `git checkout HEAD -- .` over the same rewritten files."""
    times: list[float] = []
    for _ in range(rounds):
        rewrite(repo, files, 0)
        t0 = time.perf_counter()
        _git(repo, "checkout", "HEAD", "--", ".")
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def conversion_alone(repo: Path, rounds: int) -> float:
    """`checkout_bytes` of every file of HEAD's tree, read back: what the conversion adds
    to a restore (nothing is written)."""
    import importlib.util

    if importlib.util.find_spec("git_agentckpt.git.convert") is None:
        return float("nan")  # the code before the conversion existed
    from git_agentckpt.git import convert
    from git_agentckpt.git.repo import GitRepo

    grepo = GitRepo.discover(str(repo))
    head = grepo.head()
    assert head is not None
    tree = grepo.read_commit(head).tree
    files = list(grepo.tree_files(tree))
    times: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with convert.checkout_bytes(grepo, files, tree) as data:
            for f in files:
                data.read(f.path, f.id)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def measure(repo: Path, files: int, rounds: int) -> tuple[float, float]:
    from git_agentckpt.git.restore import apply_restore, plan_restore
    from git_agentckpt.git.worktree import snapshot_tree
    from git_agentckpt.store.workspace import Workspace

    ws = Workspace.open(str(repo))
    ws.task_start("bench", "restore", [("s1", "x")])
    target = ws.create("bench", message="target")
    whole: list[float] = []
    write: list[float] = []
    for r in range(rounds):
        rewrite(repo, files, 0)  # the same rewritten tree each round: no safety after one
        t0 = time.perf_counter()
        ws.restore(target.commit)
        whole.append((time.perf_counter() - t0) * 1000)
        rewrite(repo, files, 0)
        current = snapshot_tree(ws.repo, ws.settings.secret_paths)
        plan = plan_restore(ws.repo, current, target.tree, label="bench")
        assert len(plan.writes) == files, (r, len(plan.writes))
        t0 = time.perf_counter()
        apply_restore(ws.repo, plan)
        write.append((time.perf_counter() - t0) * 1000)
    return statistics.median(whole[1:] or whole), statistics.median(write)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated subset")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-restore-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        print(f"restore of {args.files} files, median of {args.rounds} rounds (ms)")
        print(
            "| shape | restore (whole) | apply_restore (writes) | conversion alone "
            "| git checkout -- . |"
        )
        print("|---|---|---|---|---|")
        for shape in args.shapes.split(","):
            repo = make_repo(root, shape, args.files)
            whole, write = measure(repo, args.files, args.rounds)
            alone = conversion_alone(repo, args.rounds)
            reference = git_checkout(repo, args.files, args.rounds)
            print(f"| {shape} | {whole:.1f} | {write:.1f} | {alone:.1f} | {reference:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
