"""`git ckpt import claude-code`: the cost of importing a long transcript, and of
importing it again (everything already imported) or after it grew.

A synthetic Claude Code transcript of `--records` lines in the recorded shape (a
prompt, then replies with a tool_use each and its tool_result with ~2 KB of output)
is imported into a task of a fresh repository, in-process through the facade:

- first import: parse + read back the (empty) log + append every event;
- again: parse + read back the whole log, nothing appended;
- grown: the file plus 100 records: parse + read back + append the new events;
- the read-back alone (`imported_keys`) on the log the first import wrote.

Not a test: run it alone, `.venv/bin/python benchmarks/bench_import.py --records 20000`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench_lib import git, seal_environment, timed

SESSION = "0b5e1c1e-0000-4000-8000-000000000000"


def records(start: int, count: int) -> list[dict[str, object]]:
    """`count` transcript lines from number `start`: every 4 lines a prompt, a reply with
    a tool_use, its tool_result, a closing reply."""
    out: list[dict[str, object]] = []
    i = start
    while len(out) < count:
        n = i // 4
        base = {"sessionId": SESSION, "timestamp": f"2026-11-30T10:{n % 60:02d}:00.000Z"}
        usage = {"input_tokens": 10, "output_tokens": 40, "cache_read_input_tokens": 900 + n,
                 "cache_creation_input_tokens": 5}  # fmt: skip
        kind = i % 4
        if kind == 0:
            line = {"type": "user", "uuid": f"u{i}", "message": {"role": "user",
                    "content": f"step {n}: run the tests"}}  # fmt: skip
        elif kind == 1:
            line = {"type": "assistant", "uuid": f"u{i}", "message": {
                "id": f"msg_{n}a", "role": "assistant", "model": "claude-opus-5-5",
                "usage": usage, "content": [{"type": "tool_use", "id": f"toolu_{n}",
                "name": "Bash", "input": {"command": f"pytest -q test_{n}.py"}}]}}  # fmt: skip
        elif kind == 2:
            line = {"type": "user", "uuid": f"u{i}", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n}",
                 "content": f"test_{n}.py " + "." * 2000 + " passed"}]}}  # fmt: skip
        else:
            line = {"type": "assistant", "uuid": f"u{i}", "message": {
                "id": f"msg_{n}b", "role": "assistant", "model": "claude-opus-5-5",
                "usage": usage, "content": [{"type": "text", "text": "ok"}]}}  # fmt: skip
        out.append({**base, **line})
        i += 1
    return out


def write(path: Path, lines: list[dict[str, object]], mode: str = "w") -> None:
    with path.open(mode) as fh:
        for line in lines:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of the re-import")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        import git_agentckpt
        from git_agentckpt.integrations.importing import imported_keys
        from git_agentckpt.store.refs import TaskName

        repo = root / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        (repo / "f").write_text("x\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "init")
        ck = git_agentckpt.open(str(repo))
        ck.task_start("t", "bench")
        transcript = root / "session.jsonl"
        write(transcript, records(0, args.records))
        size = transcript.stat().st_size

        result = None

        def run() -> None:
            nonlocal result
            result = ck.import_transcript("claude-code", str(transcript), "t")

        first = timed(run)
        assert result is not None
        events = result.events
        again = [timed(run) for _ in range(args.rounds)]
        assert result.events == 0
        scan = [timed(lambda: imported_keys(ck.log, TaskName("t"), "claude-code"))
                for _ in range(args.rounds)]  # fmt: skip
        write(transcript, records(args.records, 100), mode="a")
        grown = timed(run)
        added = result.events
        py = sys.version.split()[0]
        again_ms, scan_ms = statistics.median(again), statistics.median(scan)
        print(f"transcript: {args.records} records, {size / 1e6:.1f} MB; python {py}")
        print(f"first import:  {first:8.0f} ms  ({events} events appended)")
        print(f"again:         {again_ms:8.0f} ms  (median of {args.rounds}; 0 appended)")
        print(f"  read-back:   {scan_ms:8.0f} ms  (imported_keys over the task's log)")
        print(f"grown by 100:  {grown:8.0f} ms  ({added} events appended)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
