"""Text written in one order and given back in the other, in constant memory.

`git ckpt log` reads a whole log newest first (git can stream it that way) and prints
it oldest first (store/log_stream.py `rendered`). The rendered lines go here in
blocks, each block already in print order; `back` gives the blocks in the reverse of
the order they came in. The blocks stay in memory up to `MEMORY` bytes, then go to an
unlinked temporary file (`tempfile.SpooledTemporaryFile`): only the block offsets stay
in memory (one per block of `BLOCK` lines).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from types import TracebackType
from typing import Self

BLOCK = 512  # entries a block holds at most
MEMORY = 1 << 20  # bytes kept in memory before the spool moves to a temporary file
_CODEC = ("utf-8", "surrogatepass")  # any str comes back as it went in


class ReverseSpool:
    """Blocks of text, given back last block first."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=MEMORY)  # noqa: SIM115 (closed by __exit__)
        self._ends: list[int] = []  # where each block ends in the file
        self._marked: list[bool] = []  # each block's mark (`add`)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._file.close()

    @property
    def blocks(self) -> int:
        return len(self._ends)

    def add(self, lines: list[str], marked: bool = False) -> None:
        """Write `lines` (given newest first) as one block, in print order, and empty
        the list; `marked`: the caller's flag for this block. No lines: no block."""
        if not lines:
            return
        lines.reverse()
        self._file.write("\n".join(lines).encode(*_CODEC))
        self._ends.append(self._file.tell())
        self._marked.append(marked)
        lines.clear()

    def marked(self, count: int | None = None) -> bool:
        """Whether a block `back(count)` gives back was added `marked`."""
        return any(self._marked[:count])

    def back(self, count: int | None = None) -> Iterator[str]:
        """The blocks, the last added first; with `count`: only the first `count` added
        (those are given back last)."""
        n = len(self._ends) if count is None else min(count, len(self._ends))
        for i in range(n - 1, -1, -1):
            start = self._ends[i - 1] if i else 0
            self._file.seek(start)
            yield self._file.read(self._ends[i] - start).decode(*_CODEC)
