"""How every file a command reads is opened: `open_input` refuses what is no regular file (a
directory, a FIFO, a device, a socket) before a byte is read and without waiting on a writer, and
`read_input` refuses too a file larger than its kind can be before reading it, so that neither a
FIFO without a writer nor /dev/zero nor a sparse file of gigabytes can hang a command or fill its
memory. Symbolic links are followed: DVC links the files it tracks into the workspace.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from zrodlo.storage.refusal import Refusal

# The most a file read whole may hold where its kind states no size of its own: a JSON or YAML
# file of Zrodlo's (a tokenizer of every Unicode character is about 10 MB).
SMALL_FILE = 64 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_input(path: Path, expected: str = "a regular file", buffering: int = -1) -> BinaryIO:
    """`path` opened for binary reading, refused with a sentence unless it is a regular file;
    `expected` says what belongs there ("a documents file"). A missing or unreadable file raises
    the OSError, for the caller to name what it was reading."""
    try:
        # Non-blocking: opening a FIFO that no process writes would otherwise wait for one.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a socket, which open() cannot read
            raise Refusal(f"{path} is a socket; {expected} is expected there") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "no regular file")
        raise Refusal(f"{path} is {kind}; {expected} is expected there")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=buffering)


def read_input(path: Path, limit: int = SMALL_FILE) -> bytes:
    """The bytes of the regular file `path`, refused before they are read where it holds more than
    `limit`, the most a file of its kind holds."""
    parts, held = [], 0
    with open_input(path, buffering=0) as handle:
        held = os.fstat(handle.fileno()).st_size
        if held <= limit:
            held = 0
            # Read to the end, but never past the limit: a file may grow while it is read.
            while held <= limit and (part := handle.read(limit + 1 - held)):
                parts.append(part)
                held += len(part)
    if held > limit:
        raise Refusal(f"{path} holds {held} bytes, more than the {limit} a file of its kind holds")
    return b"".join(parts)
