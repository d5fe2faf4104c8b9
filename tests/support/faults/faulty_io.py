"""A FileIO that fails, tears or dies on chosen storage calls, for crash and fault trials.

It wraps the real storage (local disk or S3 through fsspec) and counts the calls of each kind
whose path matches a fault's pattern; on the fault's ``nth`` match it acts:

* ``kill_before`` / ``kill_after``: SIGKILL this process before or after the call took effect;
* ``fail_before`` / ``fail_after``: raise ``OSError(EIO)`` before the call, or after it took
  effect (the caller is told "failed" although the storage changed: the ambiguous outcome);
* ``torn``: a write leaves only the first half of its bytes and raises (a store or disk that
  lost the tail); for ``create`` it leaves nothing, as a conditional PUT is all or nothing.
"""

from __future__ import annotations

import errno
import os
import re
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import fsspec
import pyarrow as pa

from paimon_core.fileio import FileIO, FileStatus

T = TypeVar("T")
OPS = ("read", "stat", "list", "write", "output", "create", "delete")
ACTIONS = ("kill_before", "kill_after", "fail_before", "fail_after", "torn")


@dataclass(frozen=True)
class Fault:
    """Act on the ``nth`` call of kind ``op`` whose path matches ``pattern``."""

    op: str
    pattern: str
    nth: int
    action: str

    def __post_init__(self) -> None:
        if self.op not in OPS or self.action not in ACTIONS or self.nth < 1:
            raise ValueError(f"bad fault {self}")


class InjectedFault(OSError):
    """The error a ``fail_*`` or ``torn`` fault raises."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EIO, message)


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class FaultyFileIO(FileIO):
    """The real FileIO of ``fs`` with ``faults`` applied; ``fired`` lists the faults that acted."""

    def __init__(self, fs: fsspec.AbstractFileSystem, faults: Sequence[Fault]) -> None:
        super().__init__(fs)
        self.faults = list(faults)
        self._seen = [0] * len(self.faults)
        self.fired: list[tuple[Fault, str]] = []
        self.calls: Counter[str] = Counter()  # every storage call by kind, faulted or not

    def _action(self, op: str, path: str) -> str | None:
        self.calls[op] += 1
        for i, fault in enumerate(self.faults):
            if fault.op == op and re.search(fault.pattern, path):
                self._seen[i] += 1
                if self._seen[i] == fault.nth:
                    self.fired.append((fault, path))
                    return fault.action
        return None

    def _around(self, op: str, path: str, call: Callable[[], T],
                tear: Callable[[], None] | None = None) -> T:
        action = self._action(op, path)
        if action == "kill_before":
            _kill()
        if action == "fail_before":
            raise InjectedFault(f"injected failure before {op} {path}")
        if action == "torn":
            if tear is not None:
                tear()
            raise InjectedFault(f"injected torn {op} of {path}")
        result = call()
        if action == "kill_after":
            _kill()
        if action == "fail_after":
            raise InjectedFault(f"injected failure after {op} {path}")
        return result

    # ---- reads ---------------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        return self._around("read", path, lambda: super(FaultyFileIO, self).read_bytes(path))

    def open_input(self, path: str, size: int | None = None) -> pa.NativeFile:
        return self._around("read", path, lambda: super(FaultyFileIO, self).open_input(path, size))

    def exists(self, path: str) -> bool:
        return self._around("stat", path, lambda: super(FaultyFileIO, self).exists(path))

    def file_size(self, path: str) -> int:
        return self._around("stat", path, lambda: super(FaultyFileIO, self).file_size(path))

    def list_dir(self, path: str) -> list[FileStatus]:
        return self._around("list", path, lambda: super(FaultyFileIO, self).list_dir(path))

    # ---- writes --------------------------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes) -> None:
        self._around("write", path, lambda: super(FaultyFileIO, self).write_bytes(path, data),
                     tear=lambda: self._write_raw(path, data[: len(data) // 2]))

    def create_if_absent(self, path: str, data: bytes) -> bool:
        return self._around("create", path, lambda: super(FaultyFileIO, self).create_if_absent(path, data),
                            tear=lambda: None)

    def open_output(self, path: str) -> pa.NativeFile:
        action = self._action("output", path)
        if action == "kill_before":
            _kill()
        if action == "fail_before":
            raise InjectedFault(f"injected failure before output {path}")
        stream = super().open_output(path)
        if action is None:
            return stream
        return pa.PythonFile(_FaultyStream(self, stream, path, action), mode="w")

    def _write_raw(self, path: str, data: bytes) -> None:
        """Write bytes in place, without the atomic temp-file step (what a torn write leaves)."""
        if self.is_local:
            os.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        else:
            self.fs.pipe_file(path, data)

    # ---- deletes -------------------------------------------------------------------------------

    def delete(self, path: str) -> None:
        self._around("delete", path, lambda: super(FaultyFileIO, self).delete(path))

    def delete_many(self, paths: Sequence[str]) -> None:
        """One by one, so a fault strikes between the deletes of a batch."""
        for path in paths:
            self._around("delete", path, lambda p=path: FileIO.delete_many(self, [p]))  # type: ignore[misc]


class _FaultyStream:
    """A data-file stream whose close kills, fails or tears (the file was streamed in full)."""

    def __init__(self, io: FaultyFileIO, stream: pa.NativeFile, path: str, action: str) -> None:
        self.io, self.stream, self.path, self.action = io, stream, path, action
        self.closed = False

    def write(self, data: Any) -> int:
        return int(self.stream.write(data))

    def tell(self) -> int:
        return int(self.stream.tell())

    def flush(self) -> None:
        self.stream.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.stream.close()
        if self.action == "torn":
            data = FileIO.read_bytes(self.io, self.path)
            self.io._write_raw(self.path, data[: len(data) // 2])
            raise InjectedFault(f"injected torn output of {self.path}")
        if self.action == "kill_after":
            _kill()
        raise InjectedFault(f"injected failure after output {self.path}")
