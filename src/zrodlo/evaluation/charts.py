"""Line charts as PNG files, drawn with matplotlib's Agg backend.

A chart has a title, a framed plot area with a light grid, labelled axes (units in the labels) and
a legend when it holds more than one line. The file holds no date and no version string (PNG
metadata left empty), and Agg renders the same pixels for the same numbers with the same
matplotlib and its bundled DejaVu font, so a chart of the same data is the same file: DVC sees no
change where there is none.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from zrodlo.storage.outputs import replace_file

Color = tuple[int, int, int]

DPI = 100
# Read from no matplotlibrc or style sheet of the machine: the same style everywhere.
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.grid": True,
    "grid.color": "#e1e1e1",
    "grid.linewidth": 0.8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "zrodlo",
}


@dataclass(frozen=True)
class Series:
    """One line of a chart: points (xs[i], ys[i]); a NaN or infinite y is a point not measured."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: Color


def render_png(
    series: list[Series],
    title: str,
    x_label: str,
    y_label: str,
    width: int = 800,
    height: int = 480,
    log_y: bool = False,
) -> bytes:
    """The PNG bytes of a line chart of `series`, `width` x `height` pixels."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        for line in series:
            xs, ys = np.asarray(line.xs, dtype=float), np.asarray(line.ys, dtype=float)
            measured = np.isfinite(xs) & np.isfinite(ys)
            count = int(measured.sum())
            marker = "o" if count <= 30 else None  # a sparse series shows its points
            axes.plot(
                xs[measured], ys[measured], label=line.name,
                color=tuple(c / 255 for c in line.color), marker=marker, markersize=3,
                linewidth=1.0 if count > 200 else 1.6,  # thin where steps are dense
            )  # fmt: skip
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        if log_y:
            axes.set_yscale("log")
            plain = FuncFormatter(lambda value, _: f"{value:g}")  # 0.6, 1, 2 rather than 6e-1
            axes.yaxis.set_major_formatter(plain)
            axes.yaxis.set_minor_formatter(plain)
        axes.set_title(title)
        axes.set_xlabel(x_label)
        axes.set_ylabel(y_label)
        if len(series) > 1:
            axes.legend(frameon=False)
        figure.tight_layout()
        buffer = io.BytesIO()
        # No Software, Creation Time or other text chunk: the bytes follow from the data alone.
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def line_chart(
    path: Path,
    series: list[Series],
    title: str,
    x_label: str,
    y_label: str,
    width: int = 800,
    height: int = 480,
    log_y: bool = False,
) -> None:
    """Write a line chart of `series` to `path` as PNG, replacing the file whole (a temporary
    sibling renamed over it), so a reader never sees half a chart."""
    replace_file(path, render_png(series, title, x_label, y_label, width, height, log_y))
