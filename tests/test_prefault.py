"""The spare child's copy-on-write faults, taken ahead (`cli/prefault.py`)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

from git_agentckpt.cli.prefault import MAX_REGION, prefault, writable_regions

MAPS = b"""\
55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 131 /usr/bin/python3.11
55d0c0c00000-55d0c0c40000 rw-p 00200000 fd:01 131 /usr/bin/python3.11
55d0c1000000-55d0c1900000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
7f0000100000-7f0008100000 rw-p 00000000 00:00 0
7f0010000000-7f0010021000 r-xp 00000000 fd:01 200 /usr/lib/libc.so.6
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
7ffc00100000-7ffc00102000 r--p 00000000 00:00 0 [vvar]
"""


def test_only_private_writable_mappings_are_populated() -> None:
    assert writable_regions(MAPS) == [
        (0x55D0C0C00000, 0x55D0C0C40000),  # the interpreter's data
        (0x55D0C1000000, 0x55D0C1900000),  # the heap
        (0x7F0000000000, 0x7F0000100000),  # an arena
    ]  # not the 128 MiB reservation, the stack, code or read-only data
    assert MAX_REGION < 0x7F0008100000 - 0x7F0000100000


def test_a_waiting_call_stops_it_at_once() -> None:
    asked: list[int] = []

    def call_waiting() -> bool:
        asked.append(1)
        return True

    assert prefault(call_waiting) == 0
    assert asked == [1]


# A parent fills 32 MiB, forks, and the child writes one byte per page of it: each
# write is a copy-on-write fault, unless the child populated its memory first.
FAULTS = """
import json, os, resource, sys
from git_agentckpt.cli.prefault import prefault
data = bytearray(os.urandom(32 << 20))
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    populated = prefault(lambda: False) if sys.argv[1] == "ahead" else 0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for at in range(0, len(data), 4096):
        data[at] = 1
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    os.write(w, json.dumps([populated, faults]).encode())
    os._exit(0)
os.close(w)
print(os.read(r, 100).decode())
os.waitpid(pid, 0)
"""


def child_faults(mode: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True
    ).stdout
    populated, faults = json.loads(out)
    return int(populated), int(faults)


def kernel_has_populate_write() -> bool:
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) >= (5, 14)


def test_the_faults_are_taken_before_the_call() -> None:
    _, faults_later = child_faults("later")
    populated, faults_ahead = child_faults("ahead")
    assert faults_later >= 8000  # 32 MiB of shared pages: one fault per page written
    if not kernel_has_populate_write():
        assert populated == 0  # madvise refused: nothing done, nothing broken
        return
    assert populated >= 32 << 20
    assert faults_ahead < faults_later // 20
