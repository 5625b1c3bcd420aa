"""The PNG line charts: a valid file (signature, chunks, CRCs, rows), lines where they must be, and
the same bytes for the same numbers."""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from zrodlo.plot import (
    FONT,
    GLYPH_HEIGHT,
    PNG_SIGNATURE,
    Series,
    encode_png,
    line_chart,
    nice_ticks,
    render_chart,
    text_mask,
    tick_label,
)

RED = (230, 20, 20)
BLUE = (20, 20, 230)


def read_png(data: bytes) -> tuple[list[tuple[bytes, bytes]], np.ndarray]:
    """The chunks of a PNG (each CRC checked) and its pixels, (height, width, 3) uint8."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        offset += 12 + length
    width, height, depth, color_type, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1]
    )
    assert (depth, color_type, compression, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(raw) == height * (1 + 3 * width)
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, 1 + 3 * width)
    assert not rows[:, 0].any()  # filter type 0 on every row: the bytes are the pixels
    return chunks, rows[:, 1:].reshape(height, width, 3)


def chart_png(series: list[Series], **size: int) -> bytes:
    return encode_png(render_chart(series, "A title", "step", "loss (nats)", **size))


def painted(pixels: np.ndarray, color: tuple[int, int, int]) -> np.ndarray:
    return (pixels == np.array(color, dtype=np.uint8)).all(axis=2)


def below_legend(pixels: np.ndarray) -> int:
    """The first row of the plot frame: the first row that is mostly black."""
    black = painted(pixels, (0, 0, 0)).sum(axis=1)
    return int(np.argmax(black > pixels.shape[1] // 2))


def test_a_chart_is_a_png_of_ihdr_idat_iend_with_valid_crcs():
    data = chart_png([Series("loss", [1, 2, 3], [3.0, 2.0, 1.5], RED)])
    assert data.startswith(PNG_SIGNATURE)
    chunks, pixels = read_png(data)
    assert [kind for kind, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">II", chunks[0][1][:8]) == (800, 480)
    assert pixels.shape == (480, 800, 3)


def test_the_size_is_the_one_asked_for():
    chunks, pixels = read_png(chart_png([Series("a", [0, 1], [0, 1], RED)], width=320, height=200))
    assert struct.unpack(">II", chunks[0][1][:8]) == (320, 200)
    assert pixels.shape == (200, 320, 3)


def test_a_horizontal_line_is_two_pixels_wide_across_the_plot():
    _, pixels = read_png(chart_png([Series("flat", [0, 10], [1.0, 1.0], RED)]))
    top = below_legend(pixels)
    per_row = painted(pixels[top:], RED).sum(axis=1)
    line_rows = np.flatnonzero(per_row > pixels.shape[1] // 2)
    assert len(line_rows) == 2 and line_rows[1] == line_rows[0] + 1
    assert per_row.sum() == per_row[line_rows].sum()  # nothing else is red below the legend


def test_a_rising_line_goes_up_from_left_to_right_without_gaps():
    _, pixels = read_png(chart_png([Series("up", [0, 10], [0.0, 10.0], RED)]))
    top = below_legend(pixels)
    rows, columns = np.nonzero(painted(pixels[top:], RED))
    assert len(columns) > 0
    assert set(range(columns.min(), columns.max() + 1)) == set(columns.tolist())
    assert rows[columns == columns.min()].mean() > rows[columns == columns.max()].mean()


def test_missing_points_are_skipped_and_the_measured_ones_joined():
    ys = [math.nan] * 11
    ys[0], ys[5], ys[10] = 4.0, 3.0, 2.5  # a held-out score every fifth step
    _, pixels = read_png(chart_png([Series("held out", list(range(11)), ys, RED)]))
    top = below_legend(pixels)
    columns = np.flatnonzero(painted(pixels[top:], RED).any(axis=0))
    assert len(columns) > 400
    assert columns.max() - columns.min() + 1 == len(columns)


def test_two_series_are_drawn_in_their_own_colors():
    _, pixels = read_png(
        chart_png(
            [
                Series("train", [0, 5, 10], [3.0, 2.0, 1.0], RED),
                Series("held out", [0, 10], [3.5, 1.5], BLUE),
            ]
        )
    )
    top = below_legend(pixels)
    assert painted(pixels[top:], RED).sum() > 500
    assert painted(pixels[top:], BLUE).sum() > 500
    # The legend shows a swatch of each color above the plot.
    assert painted(pixels[:top], RED).any() and painted(pixels[:top], BLUE).any()


def test_a_series_with_no_measured_point_draws_only_its_legend():
    _, pixels = read_png(chart_png([Series("empty", [1, 2], [math.nan, math.inf], RED)]))
    top = below_legend(pixels)
    assert not painted(pixels[top:], RED).any()
    assert painted(pixels[:top], RED).any()


def test_a_lone_point_is_marked():
    _, pixels = read_png(chart_png([Series("one", [3], [2.0], RED)]))
    assert painted(pixels[below_legend(pixels) :], RED).sum() == 16  # a 4 x 4 square


def test_the_same_numbers_give_the_same_bytes(tmp_path: Path):
    series = [
        Series("train", np.arange(1, 301), 3 * np.exp(-np.arange(300) / 80) + 1, RED),
        Series("held out", [100, 200, 300], [2.5, 1.8, 1.6], BLUE),
    ]
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    line_chart(first, series, "Loss", "step", "loss")
    line_chart(second, series, "Loss", "step", "loss")
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() == encode_png(render_chart(series, "Loss", "step", "loss"))


def test_line_chart_replaces_a_file_and_leaves_no_temporary(tmp_path: Path):
    path = tmp_path / "chart.png"
    path.write_bytes(b"old")
    line_chart(path, [Series("a", [0, 1], [1, 0], RED)], "T", "x", "y")
    read_png(path.read_bytes())
    assert [p.name for p in tmp_path.iterdir()] == ["chart.png"]


def test_the_font_has_every_character_labels_use():
    for character in "0123456789 .,-()/:_%abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
        assert character in FONT
        assert FONT[character].shape == (GLYPH_HEIGHT, 5)
    assert all(glyph.any() for character, glyph in FONT.items() if character != " ")
    assert text_mask("ab", 2).shape == (2 * GLYPH_HEIGHT, 2 * 11)
    assert (text_mask("\u00e9") == text_mask("?")).all()  # unknown characters show as ?


@pytest.mark.parametrize(
    ("low", "high", "ticks", "decimals"),
    [
        (1, 12, [0, 2, 4, 6, 8, 10, 12], 0),
        (2.3, 3.7, [2.2, 2.4, 2.6, 2.8, 3.0, 3.2, 3.4, 3.6, 3.8], 1),
        (0.0, 1200.0, [0, 200, 400, 600, 800, 1000, 1200], 0),
    ],
)
def test_ticks_are_round_numbers_covering_the_range(low, high, ticks, decimals):
    found, places = nice_ticks(low, high)
    assert places == decimals
    assert [tick_label(t, places) for t in found] == [tick_label(t, places) for t in ticks]


def test_a_constant_range_is_widened_and_labels_have_no_negative_zero():
    ticks, places = nice_ticks(0.01, 0.01)
    assert ticks[0] < 0.01 < ticks[-1]
    labels = [tick_label(t, places) for t in ticks]
    assert len(set(labels)) == len(labels)  # enough decimals to tell the ticks apart
    assert tick_label(-1e-17, 2) == "0.00"
