"""The form of a table benchmarks/README.md shows for a report in reports/bench/: its rows and
where each figure is read.

A path is keys and list indices joined by "/" (a negative index counts from the end), read within
the entry the row's `each` matched, or from the report's top where it starts with "/"; the empty
path is the entry itself. Words may hold `{path}` or `{path:unit}`, filled from the report, and
`{*}` (or `{*1}`, `{*2}` ...) for the keys `each`'s wildcards matched: no figure is typed here.
"""

from __future__ import annotations

from dataclasses import dataclass

# As the ratio of a row: Zrodlo's figure over the reference's, where the report records none.
QUOTIENT = "zrodlo / reference"
# The unit of a figure of bytes shown in MiB.
MIB = "bytes as MiB"


@dataclass(frozen=True)
class Row:
    """One line of a table: a figure of Zrodlo's, the reference it is set against, their ratio."""

    what: str  # the measurement in words
    zrodlo: str | None = None  # path of Zrodlo's figure
    unit: str = "number"  # how both figures are written: a key of summary.UNITS
    against: str = ""  # the reference in words
    reference: str | None = None  # path of the reference's figure
    ratio: str | None = None  # path of the ratio the report records, or QUOTIENT
    gloss: str = ""  # what the ratio is of: "0.94 of raw write speed", "4.03 times raw ..."
    each: str = ""  # a path with `*` wildcards: one row for every entry it matches
    leave_out: tuple[str, ...] = ()  # keys of entries `each` matches that get no row
    null: str = ""  # what a null figure means; a null without it is refused


@dataclass(frozen=True)
class Table:
    """A report's section: the part of the page it belongs to, a title, what it compares."""

    part: str
    title: str
    about: str  # one or two sentences: what is measured against what
    rows: tuple[Row, ...]
