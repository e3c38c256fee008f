"""Turn a JUnit report of the reliability tests into the figures of RELIABILITY.md.

    .venv/bin/pytest --long tests/reliability tests/test_crash_and_concurrency.py \
        --junitxml=reliability.xml
    .venv/bin/python tests/reliability/summarize.py reliability.xml

Prints, per test file, the cases run, passed, failed, skipped and their time,
then the kills of `test_kill_points.py` (every run of every case, with how
each ended) and the figures the concurrency tests recorded. Not a test: pytest
collects only `test_*.py`.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict


def main(path: str) -> int:
    root = ET.parse(path).getroot()
    files: dict[str, Counter[str]] = defaultdict(Counter)
    seconds: dict[str, float] = defaultdict(float)
    kills: Counter[str] = Counter()
    figures: list[tuple[str, str]] = []
    for case in root.iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1] or "?"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "failed", "skipped": "skipped"}[tag]
        files[name][outcome] += 1
        seconds[name] += float(case.get("time", "0"))
        for prop in case.iter("property"):
            value = json.loads(prop.get("value", "{}"))
            if prop.get("name") == "outcomes":
                for how, n in value.items():
                    kills[how.split(": ", 1)[1]] += int(n)
            elif prop.get("name") == "figures":
                figures.append((case.get("name", "?"), json.dumps(value, sort_keys=True)))
    print("| file | cases | passed | failed | skipped | seconds |")
    print("|---|---|---|---|---|---|")
    for name in sorted(files):
        c = files[name]
        total = sum(c.values())
        print(
            f"| {name} | {total} | {c['passed']} | {c['failed']} | {c['skipped']} "
            f"| {seconds[name]:.0f} |"
        )
    if kills:
        print(f"\nkill -9 at named points: {sum(kills.values())} kills")
        for how, n in kills.most_common():
            print(f"- {n} x {how}")
    for name, value in figures:
        print(f"\n{name}: {value}")
    return 0 if not any(c["failed"] for c in files.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "reliability.xml"))
