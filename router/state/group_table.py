"""One table of numbers shared by the processes of `route serve --workers N`: a small file the
supervisor names, which every worker maps into memory and changes only under an exclusive lock.

Why a mapped file and a lock, rather than the SQLite store or a state process in the supervisor:
a rate-limit take is on every request's path, and here it is a lock (two system calls; a waiter
is woken by the kernel, never polls), four floats read and four written. `python
benchmarks/group_state.py` measures a take each way: on a shared 2-core box 6 µs from the table
(12 with two processes taking at once), 2 µs in one process's memory, 28 µs (61) for a SQLite
write transaction (whose lock waiters sleep and poll, inside the event loop), 19 µs (42) for a
round trip to a state process (and every request would then depend on one more process). A worker killed while holding the lock loses
it with its file descriptor (flock), so nobody waits on a dead worker.

Layout: a header (magic, then a digest of the slot names, so workers built from different
configs never read each other's numbers), then four doubles per slot, in slot order. Every
worker builds the same slot list from the same config; the first to open the file sizes and
fills it, under the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import mmap
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["GroupTable", "GroupUnavailable", "Slot"]

Slot = tuple[str, str]  # ("backend" | "key", name): a rate limit; ("breaker", name): a backend's breaker
Record = tuple[float, float, float, float]

_MAGIC = b"routegs1"
_HEADER = struct.Struct("=8s32s")
_RECORD = struct.Struct("=4d")
_NAN = math.nan


class GroupUnavailable(OSError):
    """The table cannot be used (no fcntl on this platform, a file from another config, ...)."""


def _empty(slot: Slot) -> Record:
    # A limit never taken from is full (NaN: "no level yet"); a breaker no worker opened is closed.
    return (0.0, 0.0, 0.0, 0.0) if slot[0] == "breaker" else (_NAN, _NAN, _NAN, _NAN)


class GroupTable:
    """`with table.locked(): table.read(slot) ... table.write(slot, record)`."""

    def __init__(self, path: str, slots: Sequence[Slot]):
        try:
            import fcntl
        except ImportError:
            raise GroupUnavailable("this platform has no fcntl (file locks)") from None
        self._fcntl = fcntl
        self.path = path
        self.slots = list(slots)
        self._index = {slot: _HEADER.size + i * _RECORD.size for i, slot in enumerate(self.slots)}
        self._size = _HEADER.size + _RECORD.size * max(1, len(self.slots))
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._lock = _Locked(self._fd, fcntl)
        try:
            self._map = self._open(hashlib.sha256(json.dumps(self.slots).encode()).digest())
        except BaseException:
            os.close(self._fd)
            raise

    def _open(self, digest: bytes) -> mmap.mmap:
        with self._file_lock():
            size = os.fstat(self._fd).st_size
            if size == 0:  # the first worker: size and fill it
                os.ftruncate(self._fd, self._size)
                table = mmap.mmap(self._fd, self._size)
                _HEADER.pack_into(table, 0, _MAGIC, digest)
                for slot, offset in self._index.items():
                    _RECORD.pack_into(table, offset, *_empty(slot))
                return table
            if size != self._size:
                raise GroupUnavailable(f"{self.path} was laid out for another config")
            table = mmap.mmap(self._fd, self._size)
            magic, stored = _HEADER.unpack_from(table, 0)
            if magic != _MAGIC or stored != digest:
                table.close()
                raise GroupUnavailable(f"{self.path} was laid out for another config")
            return table

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        self._fcntl.flock(self._fd, self._fcntl.LOCK_EX)
        try:
            yield
        finally:
            self._fcntl.flock(self._fd, self._fcntl.LOCK_UN)

    def locked(self) -> _Locked:
        """Every read that leads to a write, and the write, inside one of these (not reentrant)."""
        return self._lock

    def __contains__(self, slot: Slot) -> bool:
        return slot in self._index

    def read(self, slot: Slot) -> Record:
        return _RECORD.unpack_from(self._map, self._index[slot])

    def write(self, slot: Slot, record: Record) -> None:
        _RECORD.pack_into(self._map, self._index[slot], *record)

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)


class _Locked:
    """The table's lock, as a plain context manager: it is taken on every request's path, where a
    generator-based one costs several times the two system calls."""

    __slots__ = ("_fcntl", "_fd", "_threads")

    def __init__(self, fd: int, fcntl: Any):
        self._fd, self._fcntl = fd, fcntl
        self._threads = threading.Lock()  # flock is per open file: threads of one process share it

    def __enter__(self) -> None:
        self._threads.acquire()
        try:
            self._fcntl.flock(self._fd, self._fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._fcntl.flock(self._fd, self._fcntl.LOCK_UN)
        finally:
            self._threads.release()
