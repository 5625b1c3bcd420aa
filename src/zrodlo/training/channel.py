"""The line between a worker of a data-parallel run and the process that started it.

A worker inherits two pipes from its caller, and no other process holds either, so there is no
address to find, nothing listening and nothing to authenticate:

- the report pipe, on which the worker says that it started, that it is joining the others and
  that it joined, and process 0 its progress, warnings, refusal and the checkpoints it wrote;
- the lifeline, whose write end only the caller holds: a thread of the worker waits on it, and
  when the caller ends, however it ends (SIGKILL included), the wait sees the end of the file and
  the worker ends too rather than train on alone.

A message is a JSON array after its length in four bytes. Where the worker runs without a caller
(alone, or under torchrun) it has no line and `tell` says nothing.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path
from typing import Any, BinaryIO

from zrodlo.storage.refusal import LOST_CONTACT_STATUS

LINE = "ZRODLO_LINE"  # "<report fd> <lifeline fd>" in a worker's environment
_LENGTH = struct.Struct(">I")
# No report comes near this: a step's record is some hundreds of bytes, the checkpoints' list
# a path a checkpoint. A longer length means the bytes are not a report.
LONGEST_MESSAGE = 1 << 24

_report: BinaryIO | None = None
_sending = threading.Lock()


def encoded(*message: Any) -> bytes:
    """One message as it travels: its length, then the JSON array of its parts."""
    body = json.dumps([str(part) if isinstance(part, Path) else part for part in message])
    data = body.encode()
    return _LENGTH.pack(len(data)) + data


class Messages:
    """The caller's reading of one report pipe: bytes in as they arrive, whole messages out."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[list[Any]]:
        """The messages `data` completes; a length past LONGEST_MESSAGE raises ValueError."""
        self._pending += data
        whole = []
        while len(self._pending) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self._pending)
            if length > LONGEST_MESSAGE:
                raise ValueError(f"a report of {length} bytes")
            end = _LENGTH.size + length
            if len(self._pending) < end:
                break
            whole.append(json.loads(self._pending[_LENGTH.size : end]))
            del self._pending[:end]
        return whole


def open_line() -> bool:
    """Open this worker's line to its caller, if it has one, and start watching the lifeline;
    return whether it has one."""
    global _report
    line = os.environ.get(LINE)
    if line is None:
        return False
    report, lifeline = (int(fd) for fd in line.split())
    _report = os.fdopen(report, "wb")
    threading.Thread(target=_watch, args=(lifeline,), name="zrodlo-lifeline", daemon=True).start()
    return True


def tell(*message: Any) -> None:
    """Send one message to the caller; nothing where this process has no line."""
    if _report is None:
        return
    with _sending:  # a warning may be sent from another thread while a step is
        _report.write(encoded(*message))
        _report.flush()


def _watch(lifeline: int) -> None:
    """End this process when the caller has ended: its end of the lifeline closes with it."""
    while os.read(lifeline, 1):
        pass
    os._exit(LOST_CONTACT_STATUS)
