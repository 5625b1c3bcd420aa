"""Line charts as PNG files, drawn with numpy and encoded with zlib: no plotting library needed.

A chart is a white canvas with a title, a legend, a framed plot area with grid lines, numeric ticks
on both axes and an axis label on each. Text is drawn with the 5x9 bitmap font defined below. The
bytes depend only on the arguments (integer pixel arithmetic, fixed zlib level), so a chart of the
same numbers is the same file, which keeps DVC from seeing a change where there is none.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zrodlo.output import replace_file

Color = tuple[int, int, int]

WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
GRID: Color = (225, 225, 225)
LINE_WIDTH = 2
INSET = 8  # pixels between the frame and the outermost ticks


@dataclass(frozen=True)
class Series:
    """One line of a chart: points (xs[i], ys[i]); a NaN or infinite y is a point not measured."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: Color


# --- Font --------------------------------------------------------------------------------------

# Each glyph is up to 9 rows of 5 pixels, top to bottom, one hex byte a row (0x10 the left pixel,
# rows left out are blank). Capitals and digits stand on row 6; descenders use rows 7 and 8.
GLYPH_WIDTH, GLYPH_HEIGHT = 5, 9
_FONT_ROWS = {
    " ": "",
    "0": "0E 11 13 15 19 11 0E",
    "1": "04 0C 04 04 04 04 0E",
    "2": "0E 11 01 02 04 08 1F",
    "3": "1F 02 04 02 01 11 0E",
    "4": "02 06 0A 12 1F 02 02",
    "5": "1F 10 1E 01 01 11 0E",
    "6": "06 08 10 1E 11 11 0E",
    "7": "1F 01 02 04 08 08 08",
    "8": "0E 11 11 0E 11 11 0E",
    "9": "0E 11 11 0F 01 02 0C",
    "A": "0E 11 11 11 1F 11 11",
    "B": "1E 11 11 1E 11 11 1E",
    "C": "0E 11 10 10 10 11 0E",
    "D": "1C 12 11 11 11 12 1C",
    "E": "1F 10 10 1E 10 10 1F",
    "F": "1F 10 10 1E 10 10 10",
    "G": "0E 11 10 17 11 11 0F",
    "H": "11 11 11 1F 11 11 11",
    "I": "0E 04 04 04 04 04 0E",
    "J": "07 02 02 02 02 12 0C",
    "K": "11 12 14 18 14 12 11",
    "L": "10 10 10 10 10 10 1F",
    "M": "11 1B 15 15 11 11 11",
    "N": "11 11 19 15 13 11 11",
    "O": "0E 11 11 11 11 11 0E",
    "P": "1E 11 11 1E 10 10 10",
    "Q": "0E 11 11 11 15 12 0D",
    "R": "1E 11 11 1E 14 12 11",
    "S": "0F 10 10 0E 01 01 1E",
    "T": "1F 04 04 04 04 04 04",
    "U": "11 11 11 11 11 11 0E",
    "V": "11 11 11 11 11 0A 04",
    "W": "11 11 11 15 15 15 0A",
    "X": "11 11 0A 04 0A 11 11",
    "Y": "11 11 11 0A 04 04 04",
    "Z": "1F 01 02 04 08 10 1F",
    "a": "00 00 0E 01 0F 11 0F",
    "b": "10 10 16 19 11 11 1E",
    "c": "00 00 0E 10 10 11 0E",
    "d": "01 01 0D 13 11 11 0F",
    "e": "00 00 0E 11 1F 10 0E",
    "f": "06 09 08 1C 08 08 08",
    "g": "00 00 0F 11 11 11 0F 01 0E",
    "h": "10 10 16 19 11 11 11",
    "i": "04 00 0C 04 04 04 0E",
    "j": "02 00 06 02 02 02 02 12 0C",
    "k": "10 10 12 14 18 14 12",
    "l": "0C 04 04 04 04 04 0E",
    "m": "00 00 1A 15 15 11 11",
    "n": "00 00 16 19 11 11 11",
    "o": "00 00 0E 11 11 11 0E",
    "p": "00 00 1E 11 11 11 1E 10 10",
    "q": "00 00 0F 11 11 11 0F 01 01",
    "r": "00 00 16 19 10 10 10",
    "s": "00 00 0F 10 0E 01 1E",
    "t": "08 08 1C 08 08 09 06",
    "u": "00 00 11 11 11 13 0D",
    "v": "00 00 11 11 11 0A 04",
    "w": "00 00 11 11 15 15 0A",
    "x": "00 00 11 0A 04 0A 11",
    "y": "00 00 11 11 11 11 0F 01 0E",
    "z": "00 00 1F 02 04 08 1F",
    ".": "00 00 00 00 00 0C 0C",
    ",": "00 00 00 00 00 0C 0C 04 08",
    "-": "00 00 00 0E 00 00 00",
    "+": "00 04 04 1F 04 04 00",
    "(": "02 04 08 08 08 04 02",
    ")": "08 04 02 02 02 04 08",
    "/": "00 01 02 04 08 10 00",
    ":": "00 0C 0C 00 0C 0C 00",
    "_": "00 00 00 00 00 00 00 1F",
    "%": "18 19 02 04 08 13 03",
    "?": "0E 11 01 02 04 00 04",
}


def _glyph(rows: str) -> np.ndarray:
    """A glyph's hex rows as a (GLYPH_HEIGHT, GLYPH_WIDTH) bool mask."""
    values = [int(row, 16) for row in rows.split()]
    values += [0] * (GLYPH_HEIGHT - len(values))
    bits = [
        [(value >> (GLYPH_WIDTH - 1 - column)) & 1 for column in range(GLYPH_WIDTH)]
        for value in values
    ]
    return np.array(bits, dtype=bool)


FONT = {character: _glyph(rows) for character, rows in _FONT_ROWS.items()}


def text_mask(text: str, scale: int = 1) -> np.ndarray:
    """The pixels of `text` as a bool mask (9*scale, 6*scale*len - scale); a character the font
    lacks is drawn as `?`."""
    if not text:
        return np.zeros((GLYPH_HEIGHT * scale, 0), dtype=bool)
    blank = np.zeros((GLYPH_HEIGHT, 1), dtype=bool)  # one pixel between characters
    pieces: list[np.ndarray] = []
    for character in text:
        pieces += [FONT.get(character, FONT["?"]), blank]
    mask = np.concatenate(pieces[:-1], axis=1)
    return mask.repeat(scale, axis=0).repeat(scale, axis=1)


# --- Rasterising -------------------------------------------------------------------------------


def blit(canvas: np.ndarray, mask: np.ndarray, left: int, top: int, color: Color) -> None:
    """Paint `color` where `mask` is set, with the mask's top-left corner at (left, top); the
    parts that fall off the canvas are dropped."""
    height, width = canvas.shape[:2]
    rows, columns = np.nonzero(mask)
    rows, columns = rows + top, columns + left
    inside = (rows >= 0) & (rows < height) & (columns >= 0) & (columns < width)
    canvas[rows[inside], columns[inside]] = color


def fill_rectangle(
    canvas: np.ndarray, left: int, top: int, right: int, bottom: int, color: Color
) -> None:
    """Fill the pixels left <= x < right, top <= y < bottom."""
    canvas[max(top, 0) : max(bottom, 0), max(left, 0) : max(right, 0)] = color


def draw_polyline(
    canvas: np.ndarray,
    xs: np.ndarray,
    ys: np.ndarray,
    color: Color,
    clip: tuple[int, int, int, int],
) -> None:
    """Join the points (xs[i], ys[i]) in pixel coordinates with a line LINE_WIDTH pixels wide.

    A LINE_WIDTH square is stamped at points twice as dense as the pixels along each segment,
    which leaves no gaps at any slope. Pixels outside clip (left, top, right, bottom; right and
    bottom excluded) are not painted, so a line never covers the frame.
    """
    if len(xs) == 0:
        return
    if len(xs) == 1:
        # A lone measurement has nothing to join: a square twice the line width marks it.
        xs, ys = np.repeat(xs, 2), np.repeat(ys, 2)  # a segment of length zero
        offsets = range(-LINE_WIDTH, LINE_WIDTH)
    else:
        offsets = range(LINE_WIDTH)
    # Sample every segment at twice its length in pixels (and its ends), all segments at once:
    # segment[i] says which segment sample i lies on, t[i] how far along it.
    dx, dy = np.diff(xs), np.diff(ys)
    counts = 2 * np.ceil(np.maximum(np.abs(dx), np.abs(dy))).astype(np.int64) + 2
    segment = np.repeat(np.arange(len(dx)), counts)
    starts = np.cumsum(counts) - counts
    t = (np.arange(counts.sum()) - starts[segment]) / (counts[segment] - 1)
    along_x = xs[segment] + t * dx[segment]
    along_y = ys[segment] + t * dy[segment]
    # The stamp's top-left corner sits half a line width up and left, centring it on the path.
    px = np.floor(along_x - (LINE_WIDTH - 1) / 2 + 0.5).astype(np.int64)
    py = np.floor(along_y - (LINE_WIDTH - 1) / 2 + 0.5).astype(np.int64)
    left, top, right, bottom = clip
    for row in offsets:
        for column in offsets:
            x, y = px + column, py + row
            inside = (x >= left) & (x < right) & (y >= top) & (y < bottom)
            canvas[y[inside], x[inside]] = color


# --- Axes --------------------------------------------------------------------------------------


def nice_ticks(low: float, high: float, most: int = 8) -> tuple[list[float], int]:
    """Tick values covering [low, high] spaced 1, 2 or 5 times a power of ten, at most `most`+1 of
    them, and the number of decimals that prints them exactly enough to tell apart."""
    if not (math.isfinite(low) and math.isfinite(high)):
        low, high = 0.0, 1.0
    if high <= low:
        # One value only (a constant learning rate): widen the axis around it.
        pad = abs(low) * 0.1 if low != 0 else 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / most
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    # Ticks are whole multiples of the step, so they carry no accumulated rounding error.
    ticks = [k * step for k in range(first, last + 1)]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return ticks, decimals


def tick_label(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.0"


def _finite_points(series: Series) -> tuple[np.ndarray, np.ndarray]:
    xs = np.asarray(series.xs, dtype=float)
    ys = np.asarray(series.ys, dtype=float)
    if xs.shape != ys.shape:
        raise ValueError(f"series {series.name!r} has {xs.size} xs and {ys.size} ys")
    keep = np.isfinite(xs) & np.isfinite(ys)
    return xs[keep], ys[keep]


def _span(values: list[np.ndarray]) -> tuple[float, float]:
    joined = np.concatenate(values) if values else np.zeros(0)
    if joined.size == 0:
        return 0.0, 1.0
    return float(joined.min()), float(joined.max())


# --- Chart -------------------------------------------------------------------------------------


def render_chart(
    series: list[Series],
    title: str,
    x_label: str,
    y_label: str,
    width: int = 800,
    height: int = 480,
) -> np.ndarray:
    """The chart's pixels: (height, width, 3) uint8 RGB."""
    canvas = np.full((height, width, 3), WHITE, dtype=np.uint8)
    points = [_finite_points(s) for s in series]
    x_ticks, x_decimals = nice_ticks(*_span([xs for xs, _ in points]))
    y_ticks, y_decimals = nice_ticks(*_span([ys for _, ys in points]))
    x_texts = [tick_label(v, x_decimals) for v in x_ticks]
    y_texts = [tick_label(v, y_decimals) for v in y_ticks]

    # Layout, top to bottom: title, legend, plot area, x tick labels, x label; left to right: the
    # rotated y label, y tick labels, plot area. Text heights are in font pixels times the scale.
    title_mask = text_mask(title, 2)
    legend_top = 12 + title_mask.shape[0] + 10
    legend_line = GLYPH_HEIGHT * 2
    plot_top = legend_top + legend_line + 14
    y_label_mask = np.rot90(text_mask(y_label, 2))  # reads bottom to top
    tick_width = max(text_mask(t, 2).shape[1] for t in y_texts)
    plot_left = 12 + y_label_mask.shape[1] + 10 + tick_width + 8
    x_label_mask = text_mask(x_label, 2)
    plot_bottom = height - (12 + x_label_mask.shape[0] + 10 + GLYPH_HEIGHT * 2 + 8)
    plot_right = width - 24

    # The first and last ticks sit INSET pixels inside the frame, so that a line running along
    # the edge of the range (a constant learning rate, say) is not hidden by the frame.
    inner_left, inner_right = plot_left + INSET, plot_right - 1 - INSET
    inner_top, inner_bottom = plot_top + INSET, plot_bottom - 1 - INSET

    def to_x(value: np.ndarray | float) -> np.ndarray:
        low, high = x_ticks[0], x_ticks[-1]
        return inner_left + (np.asarray(value) - low) / (high - low) * (inner_right - inner_left)

    def to_y(value: np.ndarray | float) -> np.ndarray:
        low, high = y_ticks[0], y_ticks[-1]
        return inner_bottom - (np.asarray(value) - low) / (high - low) * (inner_bottom - inner_top)

    # Grid and ticks first, so that the lines are drawn over them.
    for value, text in zip(x_ticks, x_texts, strict=True):
        x = round(float(to_x(value)))
        fill_rectangle(canvas, x, plot_top, x + 1, plot_bottom, GRID)
        fill_rectangle(canvas, x, plot_bottom, x + 1, plot_bottom + 5, BLACK)
        mask = text_mask(text, 2)
        blit(canvas, mask, x - mask.shape[1] // 2, plot_bottom + 8, BLACK)
    for value, text in zip(y_ticks, y_texts, strict=True):
        y = round(float(to_y(value)))
        fill_rectangle(canvas, plot_left, y, plot_right, y + 1, GRID)
        fill_rectangle(canvas, plot_left - 5, y, plot_left, y + 1, BLACK)
        mask = text_mask(text, 2)
        blit(canvas, mask, plot_left - 8 - mask.shape[1], y - 7, BLACK)

    clip = (plot_left + 1, plot_top + 1, plot_right - 1, plot_bottom - 1)  # inside the frame
    for item, (xs, ys) in zip(series, points, strict=True):
        order = np.argsort(xs, kind="stable")  # a line runs left to right whatever the input order
        draw_polyline(canvas, to_x(xs[order]), to_y(ys[order]), item.color, clip)

    # The frame last, so that a line at the edge of the range does not hide it.
    fill_rectangle(canvas, plot_left, plot_top, plot_right, plot_top + 1, BLACK)
    fill_rectangle(canvas, plot_left, plot_bottom - 1, plot_right, plot_bottom, BLACK)
    fill_rectangle(canvas, plot_left, plot_top, plot_left + 1, plot_bottom, BLACK)
    fill_rectangle(canvas, plot_right - 1, plot_top, plot_right, plot_bottom, BLACK)

    blit(canvas, title_mask, (width - title_mask.shape[1]) // 2, 12, BLACK)
    center_x = (plot_left + plot_right) // 2
    blit(
        canvas,
        x_label_mask,
        center_x - x_label_mask.shape[1] // 2,
        height - 12 - x_label_mask.shape[0],
        BLACK,
    )
    center_y = (plot_top + plot_bottom) // 2
    blit(canvas, y_label_mask, 12, center_y - y_label_mask.shape[0] // 2, BLACK)
    _draw_legend(canvas, series, legend_top, plot_left, plot_right)
    return canvas


def _draw_legend(canvas: np.ndarray, series: list[Series], top: int, left: int, right: int) -> None:
    """One entry per series (a stroke of its color, then its name) in a row above the plot area,
    where it can never cover a line; the row is centred over the plot area."""
    swatch, gap = 24, 24
    names = [text_mask(s.name, 2) for s in series]
    total = sum(swatch + 8 + mask.shape[1] for mask in names) + gap * (len(series) - 1)
    x = left + max(0, (right - left - total) // 2)
    for item, mask in zip(series, names, strict=True):
        middle = top + 7  # the middle of a capital at scale 2
        fill_rectangle(
            canvas,
            x,
            middle - LINE_WIDTH // 2,
            x + swatch,
            middle - LINE_WIDTH // 2 + LINE_WIDTH,
            item.color,
        )
        blit(canvas, mask, x + swatch + 8, top, BLACK)
        x += swatch + 8 + mask.shape[1] + gap


# --- PNG ---------------------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data and the CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(pixels: np.ndarray) -> bytes:
    """(height, width, 3) uint8 RGB as a PNG file: 8-bit truecolour, no interlace, filter 0."""
    height, width, channels = pixels.shape
    if channels != 3 or pixels.dtype != np.uint8:
        raise ValueError(f"pixels are {pixels.shape} {pixels.dtype}, not (height, width, 3) uint8")
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = np.zeros((height, 1 + width * 3), dtype=np.uint8)  # first byte of each row: filter 0
    rows[:, 1:] = pixels.reshape(height, width * 3)
    return (
        PNG_SIGNATURE
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + png_chunk(b"IEND", b"")
    )


def line_chart(
    path: Path,
    series: list[Series],
    title: str,
    x_label: str,
    y_label: str,
    width: int = 800,
    height: int = 480,
) -> None:
    """Write a line chart of `series` to `path` as PNG, replacing the file whole (a temporary
    sibling renamed over it), so a reader never sees half a chart."""
    replace_file(path, encode_png(render_chart(series, title, x_label, y_label, width, height)))
