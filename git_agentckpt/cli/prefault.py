"""Copy-on-write faults taken ahead: the daemon's spare child makes its memory its own
before its call comes (`cli/daemon_spare.py`).

A forked child shares the daemon's pages until it writes to them, and Python writes
to nearly every object it touches (reference counts). A served resume took ~2,650
minor faults from the hand-over to its exit, ~3 µs each on this VM: 7-10 ms of a
~36 ms call. The spare, idle until its call, asks the kernel to break the sharing of
every private writable mapping at once (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14+:
no trap per page), 2 MiB at a time, and stops as soon as its call is waiting
(`interrupted`), so a call never waits for more than one slice (~1 ms). The same
resume then takes ~90 faults. It costs the spare ~20 ms of CPU between calls and
~35 MB of memory of its own while it waits. On an older kernel `madvise` refuses and
nothing is done.
"""

from __future__ import annotations

from collections.abc import Callable

MADV_POPULATE_WRITE = 23  # <linux/mman.h>, Linux 5.14
SLICE = 2 << 20  # bytes populated between two looks at `interrupted`
MAX_REGION = 64 << 20  # a larger writable mapping is a reservation, not our heap: skipped
MAX_TOTAL = 256 << 20  # bytes populated at most


def writable_regions(maps: bytes) -> list[tuple[int, int]]:
    """(start, end) of the private writable mappings in `/proc/<pid>/maps` text, but the
    stack and any larger than MAX_REGION."""
    regions = []
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[1] != b"rw-p" or fields[-1] == b"[stack]":
            continue
        low, _, high = fields[0].partition(b"-")
        start, end = int(low, 16), int(high, 16)
        if 0 < end - start <= MAX_REGION:
            regions.append((start, end))
    return regions


def prefault(interrupted: Callable[[], bool]) -> int:
    """Populate this process's private writable memory for writing, a slice at a time,
    until done or `interrupted()`; the bytes populated (0: not supported here)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise.restype = ctypes.c_int
        with open("/proc/self/maps", "rb") as fh:
            maps = fh.read()
    except (OSError, AttributeError, ImportError):
        return 0
    done = 0
    for start, end in writable_regions(maps):
        for at in range(start, end, SLICE):
            if done >= MAX_TOTAL or interrupted():
                return done
            size = min(SLICE, end - at)
            if madvise(at, size, MADV_POPULATE_WRITE) != 0:
                if done == 0 and ctypes.get_errno() == 22:  # EINVAL: an older kernel
                    return 0
                break  # unmapped or changed meanwhile: the next region
            done += size
    return done
