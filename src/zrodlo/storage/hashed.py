"""Files written and read at the speed of the disk while a second thread hashes them: a chunk at a
time, each hashed while it is still in the cache its write or read just brought it into.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zrodlo.storage.inputs import open_input

# What is hashed at a time, while the next is read or written: small enough that the hashing thread
# finds it still in the cache the read or write just brought it into (1 MiB measured best on a 2 MiB
# L2; 4 MiB hashed from memory and took 15% longer).
CHUNK = 1 << 20
# How much a write lets pile up in the page cache before it asks the disk to start on it, so that
# the disk writes while the rest is still being copied and hashed, not only in the closing fsync.
WRITEBACK = 4 << 20


def _writeback_starter() -> Callable[[int, int, int, int], int] | None:
    """Linux's sync_file_range, which starts writing a range of a file to disk and returns without
    waiting (the standard library has no binding); None where there is none. It only starts the
    writing early: the fsync that closes every write is what makes the file durable."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_START_WRITEBACK = _writeback_starter()
_SYNC_FILE_RANGE_WRITE = 2  # from <fcntl.h>: start writeback of dirty pages, do not wait


def update(digest: hashlib._Hash, chunk: list[memoryview]) -> None:
    """Hash a chunk's parts in order."""
    for part in chunk:
        digest.update(part)


def write_all(handle: BinaryIO, chunk: list[memoryview]) -> int:
    """Write a chunk's parts, in one system call where the system takes them all at once (an
    unbuffered write may take less than it is given); return the bytes written."""
    total = sum(len(part) for part in chunk)
    while chunk:
        count = os.writev(handle.fileno(), chunk)
        while chunk and count >= len(chunk[0]):
            count -= len(chunk[0])
            chunk = chunk[1:]
        if count:
            chunk = [chunk[0][count:], *chunk[1:]]
    return total


def start_writeback(fd: int, begin: int, length: int) -> None:
    """Ask the disk to start writing bytes begin..begin+length of a file, where the system can be
    asked; a refusal is harmless, since the closing sync writes whatever is left."""
    if _START_WRITEBACK is not None and length:
        _START_WRITEBACK(fd, begin, length, _SYNC_FILE_RANGE_WRITE)


def read_hashed(paths: list[Path]) -> list[tuple[memoryview, str]]:
    """Each file's bytes in a writable buffer of its own, and their sha256.

    The files are read a chunk at a time into memory never written before (no zeroing pass),
    while a second thread hashes the chunks already read, so hashing costs no time of its own
    where it keeps up with the disk. A file that shrinks while it is read gives the bytes it
    had, which then fail their digest.
    """
    read = []
    with ThreadPoolExecutor(max_workers=1) as hashing:  # leaving the block awaits every hash
        for path in paths:
            with open_input(path, buffering=0) as handle:
                buffer = memoryview(np.empty(os.fstat(handle.fileno()).st_size, dtype=np.uint8))
                digest, filled = hashlib.sha256(), 0
                while filled < len(buffer):
                    count = handle.readinto(buffer[filled : filled + CHUNK])
                    if not count:
                        break
                    hashing.submit(digest.update, buffer[filled : filled + count])
                    filled += count
            read.append((buffer[:filled], digest))
    return [(buffer, digest.hexdigest()) for buffer, digest in read]
