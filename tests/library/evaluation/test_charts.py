"""The PNG line charts, drawn with matplotlib: a valid file of the asked size, each series in its
own color, unmeasured points skipped, and the same bytes for the same numbers."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
from PIL import Image

from zrodlo.evaluation.charts import Series, line_chart, render_png

RED = (230, 20, 20)
BLUE = (20, 20, 230)


def pixels(data: bytes) -> np.ndarray:
    """The chart's pixels, (height, width, 3) uint8."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def has_color(image: np.ndarray, color: tuple[int, int, int], tolerance: int = 10) -> bool:
    return bool((np.abs(image.astype(int) - color).max(axis=2) <= tolerance).any())


def chart(*series: Series, **options) -> bytes:
    return render_png(list(series), "Title", "step", "loss (nats per character)", **options)


def test_a_chart_is_a_png_of_the_asked_size_with_no_text_chunks():
    data = chart(Series("a", [1, 2, 3], [3.0, 2.0, 1.0], RED), width=640, height=320)
    assert Image.open(io.BytesIO(data)).size == (640, 320)
    for kind in (b"tEXt", b"zTXt", b"iTXt", b"tIME"):  # no version, no date
        assert kind not in data


def test_each_series_is_drawn_in_its_own_color():
    image = pixels(
        chart(Series("a", [1, 2, 3], [3, 2, 1], RED), Series("b", [1, 2, 3], [1, 2, 3], BLUE))
    )
    assert has_color(image, RED) and has_color(image, BLUE)
    assert not has_color(pixels(chart(Series("a", [1, 2], [1, 2], RED))), BLUE)


def test_unmeasured_points_are_skipped_and_an_empty_series_is_no_error():
    held_out = Series("held-out", [1, 2, 3, 4], [math.nan, 2.0, math.nan, 1.5], BLUE)
    empty = Series("none", [1, 2], [math.nan, math.inf], RED)
    image = pixels(chart(held_out, empty))
    assert has_color(image, BLUE)


def test_the_same_numbers_give_the_same_bytes_and_others_do_not():
    first = chart(Series("a", [1, 2, 3], [3.0, 2.0, 1.0], RED))
    assert chart(Series("a", [1, 2, 3], [3.0, 2.0, 1.0], RED)) == first
    assert chart(Series("a", [1, 2, 3], [3.0, 2.0, 1.5], RED)) != first


def test_a_log_scale_chart_renders():
    data = chart(Series("norm", [1, 2, 3], [10.0, 1.0, 0.1], RED), log_y=True)
    assert has_color(pixels(data), RED)


def test_line_chart_replaces_a_file_and_leaves_no_temporary(tmp_path: Path):
    path = tmp_path / "chart.png"
    path.write_bytes(b"old")
    line_chart(path, [Series("a", [1, 2], [1.0, 2.0], RED)], "T", "step", "y")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert [p.name for p in tmp_path.iterdir()] == ["chart.png"]
