"""The one exception a refusal raises: it carries the sentence the user reads after `Error: `.

`WriteFailure` is the refusal of the operating system rather than of Zrodlo (a full disk, a
read-only directory): its sentence names the output that could not be written and why.
`LostContact` ends a process of a data-parallel run whose peer is gone. `shown`
writes a number into a sentence as the user typed it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

_SOURCE_PLACE = re.compile(r"^\[[^\]]*\.\w+:\d+\] ")
# How pyarrow, which sets no errno on the OSError it raises, states the system's error number.
_STATED_ERRNO = re.compile(r"\[errno (\d+)\]")


def cause(error: OSError) -> str:
    """The operating system's own words for what went wrong: "No space left on device"."""
    stated = _STATED_ERRNO.search(str(error))
    if stated:
        return os.strerror(int(stated.group(1)))
    return error.strerror or str(error)


class Refusal(Exception):
    """A request Zrodlo will not carry out; `sentence` says which value was read and what is needed."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


class WriteFailure(Refusal):
    """An output the operating system would not let Zrodlo write; what it half wrote is removed."""

    def __init__(self, path: Path, error: OSError, then: str | None = None) -> None:
        sentence = f"{path} cannot be written: {cause(error)}"
        super().__init__(sentence if then is None else f"{sentence}; {then}")
        self.path = path
        self.error = error


# A worker that lost contact with another ends with this status and, started by `--processes`,
# says nothing: the launcher names the process that failed first.
LOST_CONTACT_STATUS = 3
QUIET_ON_LOST_CONTACT = "ZRODLO_QUIET_ON_LOST_CONTACT"


class LostContact(Refusal):
    """A process of a data-parallel run that another has stopped answering: it died, or hangs."""

    def __init__(self, rank: int, world: int, error: BaseException) -> None:
        # gloo's message: "[<source file>:<line>] Read error [<peer>]: Connection reset by
        # peer. This is typically caused by ..."; its first sentence says what happened.
        said = _SOURCE_PLACE.sub("", " ".join(str(error).split())).split(". ")[0].rstrip(".")
        super().__init__(
            f"process {rank} of {world} lost contact with the other processes of the run "
            f"({said or type(error).__name__}); the checkpoints already written are whole"
        )


def listed(names: Iterable[str], last: str = "or") -> str:
    """Names as a sentence lists them: "a, b or c" ("a" alone, "a or b")."""
    *others, final = names
    return f"{', '.join(others)} {last} {final}" if others else final


def shown(value: float | int) -> str:
    """A number as the user typed it, as near as the parsed value allows: `0.1`, `nan`, `-3`."""
    if isinstance(value, bool) or not isinstance(value, int):
        # float() first: repr of a numpy scalar would name its type (`np.float64(0.1)`).
        return repr(float(value))
    return str(value)
