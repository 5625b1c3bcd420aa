"""The README a newcomer reads: short, and its scores the ones the committed pipeline wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def table_rows(page: str, first: str) -> list[tuple[str, list[str]]]:
    """The rows of a markdown table whose first cell matches `first` (one group): that group and
    the other cells."""
    rows = re.findall(rf"^\| {first} \| (.+) \|$", page, re.M)
    return [(name, [cell.strip() for cell in cells.split("|")]) for name, cells in rows]


def test_the_readme_reads_in_five_minutes():
    assert len(README.splitlines()) <= 200


def test_the_scores_are_those_of_reports_metrics_json():
    scores = json.loads((ROOT / "reports" / "metrics.json").read_text())
    rows = table_rows(README, "(train|validation|test)")
    assert [name for name, _ in rows] == ["train", "validation", "test"]
    for name, cells in rows:
        entry = scores[name]
        expected = [
            f"{entry['loss']:.4f}",
            f"{entry['perplexity']:.3f}",
            f"{entry['bits_per_character']:.4f}",
            f"{entry['bits_per_byte']:.4f}",
            f"{entry['bigram_loss']:.4f}",
            f"{entry['loss'] / entry['bigram_loss']:.3f}",
        ]
        assert cells == expected, name


def test_the_command_table_lists_every_command():
    from typer.main import get_command

    from zrodlo.stages.cli import app

    def names(group, words=()):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from names(command, (*words, name))
            else:
                yield " ".join((*words, name))

    section = README[README.index("## Commands") :]
    section = section[: section.index("\n## ")]
    listed = [name for name, _ in table_rows(section, r"`([a-z -]+)`")]
    assert sorted(listed) == sorted(names(get_command(app)))


def test_every_linked_document_exists():
    for link in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / link).is_file(), link


def test_the_sizes_are_those_benchmarks_presets_measured():
    measured = json.loads((ROOT / "reports" / "bench" / "presets.json").read_text())
    rows = table_rows((ROOT / "docs" / "models.md").read_text(), "`(tiny|small|medium)`")
    assert [name for name, _ in rows] == list(measured["presets"])
    for name, cells in rows:
        entry = measured["presets"][name]
        shape = entry["shape"]
        reached = [
            "—" if seconds is None else f"{seconds:.0f} s"
            for seconds in entry["training_seconds_to"].values()
        ]
        expected = [
            f"{shape['layers']} × {shape['d_model']}",
            f"{entry['parameters']:,}",
            f"{entry['seconds_per_step']:.3f}",
            f"{entry['suits_million_characters']:g} M",
            *reached,
            f"{entry['validation_loss_at_end']:.3f}",
        ]
        assert cells == expected, name


def test_the_tokenizer_table_is_what_the_benchmark_measured():
    measured = json.loads((ROOT / "reports" / "bench" / "tokenizers.json").read_text())
    page = (ROOT / "docs" / "tokenizers.md").read_text()
    rows = table_rows(page, r"`(char|bpe \d+)`")
    assert [name for name, _ in rows] == list(measured["runs"])
    for name, cells in rows:
        entry = measured["runs"][name]
        equal_time = entry["bits_per_byte_at_equal_time"]
        expected = [
            f"{entry['vocab_size']:,}",
            f"{entry['bytes_per_token']:.2f}",
            f"{entry['tokens_per_second']:,}",
            f"{entry['bytes_per_second']:,}",
            f"{entry['bits_per_byte_at_equal_steps']:.3f}",
            "—" if equal_time is None else f"{equal_time:.3f}",
        ]
        assert cells == expected, name
    steps, every = measured["steps"], measured["eval_every"]
    assert f"for {steps}\nsteps, the whole validation pool scored every {every};" in page
    assert f"within the fastest run's {measured['equal_time_seconds']:.0f} s of steps" in page


def quality_for_time() -> tuple[dict, list[str]]:
    measured = json.loads((ROOT / "reports" / "bench" / "quality_for_time.json").read_text())
    return measured, list(measured["budgets"])


def test_the_quality_table_is_what_benchmarks_quality_for_time_measured():
    """README: each configuration's seconds a step and its best validation bits per byte at each
    budget, with the learning rate that gave it."""
    measured, budgets = quality_for_time()
    rows = table_rows(README, "`(char gpt|char llama|bpe gpt|bpe llama)`")
    first = measured["budgets"][budgets[0]]
    assert [name for name, _ in rows] == list(first)
    for name, cells in rows:
        expected = [f"{first[name]['seconds_per_step']:.3f}"]
        for budget in budgets:
            entry = measured["budgets"][budget][name]
            expected.append(f"{entry['best_bits_per_byte']:.3f} ({entry['best_learning_rate']:g})")
        assert cells == expected, name
    header = " | ".join(f"{budget}, bits/byte (rate)" for budget in budgets)
    assert f"| decoder and tokenizer | s/step | {header} |" in README


def test_every_learning_rate_of_the_sweep_is_in_docs_models():
    """docs/models.md: every run of the sweep, so the best rate is seen against the others."""
    measured, budgets = quality_for_time()
    page = (ROOT / "docs" / "models.md").read_text()
    rates = measured["learning_rates"]
    for budget in budgets:
        rows = table_rows(page, rf"{budget[: -len(' minutes')]} min, `(.+?)`")
        assert [name for name, _ in rows] == list(measured["budgets"][budget]), budget
        for name, cells in rows:
            entry = measured["budgets"][budget][name]
            runs = entry["runs"]
            assert cells == [str(entry["steps"])] + [
                f"{runs[str(rate)]['final_bits_per_byte']:.3f}" for rate in rates
            ], (budget, name)
    assert (
        "| budget, decoder and tokenizer | steps | "
        + " | ".join(f"{rate:g}" for rate in rates)
        + " |"
        in page
    )


# A recipe's row in docs/recipes.md: its name, steps, the best run's seconds of steps and scores,
# and its validation bits per byte (its rate); in the README, steps and bits (rate) at 2 and 4 minutes,
# then bits (rate) on the second text at 2 and 4 minutes, and at the larger scale, or a dash for a
# recipe not run there.
RECIPE_ROW = re.compile(r"^\| [^|]+ \| (\d+) \| (\d+) \| (\d\.\d{3}) \((\S+)\) \|$", re.M)
README_RECIPE_ROW = re.compile(
    r"^\| [^|]+ \| (\d+) \| (\d\.\d{3}) \((\S+)\) \| (\d+) \| (\d\.\d{3}) \((\S+)\) "
    r"\| (\d\.\d{3} \(\S+\)) \| (\d\.\d{3} \(\S+\)) \| (\d\.\d{3} \(\S+\)|—) \| (\d\.\d{3} \(\S+\)|—) \|$",
    re.M,
)
# The recipes of README's table, in its order; docs/recipes.md has every recipe measured.
README_RECIPES = ("adamw", "nanogpt", "nanochat", "new recipe, SwiGLU")


def recipe_rows(report: str, names=None, budget="2 minutes") -> list[tuple[str, str, str, str]]:
    measured = json.loads((ROOT / "reports" / "bench" / f"{report}.json").read_text())
    entries = measured["budgets"][budget]
    rows = []
    for entry in (entries[name] for name in (names or entries)):
        rate = entry["best_learning_rate"]
        best = entry["runs"][str(rate)]
        rows.append((str(entry["steps"]), f"{best['seconds']:.0f}", f"{best['bits_per_byte']:.3f}",
                     f"{rate:g}"))  # fmt: skip
    return rows


# The larger scale's reports: 7 minutes of each run at three rates, 30 at the best of those.
LARGER_SCALE = ("recipes_large", "recipes_large_30")


def larger_scale(report: str) -> dict:
    return json.loads((ROOT / "reports" / "bench" / f"{report}.json").read_text())


def test_the_recipes_table_is_what_benchmarks_recipes_measured():
    """README: the AdamW recipe's, nanoGPT's, nanochat's and the pipeline's steps and best
    validation bits per byte (rate) in two minutes and in four, their bits (rate) on the second
    text in two and in four, and at the larger scale in seven and in thirty."""
    two, four = (
        recipe_rows(report, README_RECIPES, budget)
        for report, budget in (("recipes", "2 minutes"), ("recipes_4_minutes", "4 minutes"))
    )
    text_two, text_four = (
        [f"{bits} ({rate})" for _, _, bits, rate in recipe_rows(report, README_RECIPES, budget)]
        for report, budget in (
            ("recipes_python", "2 minutes"),
            ("recipes_python_4_minutes", "4 minutes"),
        )
    )
    seven, thirty = (
        [
            f"{large[name]['best_bits_per_byte']:.3f} ({large[name]['best_learning_rate']:g})"
            if name in large
            else "—"
            for name in README_RECIPES
        ]
        for large in (larger_scale(report)["recipes"] for report in LARGER_SCALE)
    )
    rows = zip(two, four, text_two, text_four, seven, thirty, strict=True)
    expected = [
        (s2, b2, r2, s4, b4, r4, t2, t4, x, y)
        for (s2, _, b2, r2), (s4, _, b4, r4), t2, t4, x, y in rows
    ]
    assert README_RECIPE_ROW.findall(README) == expected


def test_the_ablation_in_docs_training_is_what_benchmarks_recipes_measured():
    """docs/recipes.md: every recipe measured on the default documents for two minutes and for
    four, then on the second text for two and for four, then the x0 mix and the value
    embeddings over the pipeline's recipe, then nanochat's recipe with both, then those head to
    head on both texts: its steps, seconds and best bits per byte (rate)."""
    page = (ROOT / "docs" / "recipes.md").read_text()
    assert RECIPE_ROW.findall(page) == (
        recipe_rows("recipes")
        + recipe_rows("recipes_4_minutes", budget="4 minutes")
        + recipe_rows("recipes_python")
        + recipe_rows("recipes_python_4_minutes", budget="4 minutes")
        + recipe_rows("recipes_x0_mix")
        + recipe_rows("recipes_value_embeddings")
        + recipe_rows("recipes_nanochat_whole")
        + recipe_rows("recipes_head_to_head")
        + recipe_rows("recipes_python_head_to_head")
    )


# A recipe's row at several seeds: its name, rate, steps, mean bits per byte, each seed's bits.
SEEDED_ROW = re.compile(r"^\| [^|]+ \| (\S+) \| (\d+) \| (\d\.\d{3})((?: \| \d\.\d{3})+) \|$", re.M)


def test_the_seeds_in_docs_recipes_are_what_benchmarks_recipes_measured():
    """docs/recipes.md: each recipe of the three seeds' reports (the default documents, then the
    second text; then another shape on each) at each rate it ran, its steps, its mean bits per
    byte and each seed's."""
    reports = (
        "recipes_seeds",
        "recipes_python_seeds",
        "recipes_pipeline_seeds",
        "recipes_python_pipeline_seeds",
    )
    measured = [json.loads((ROOT / "reports" / "bench" / f"{r}.json").read_text()) for r in reports]
    page = (ROOT / "docs" / "recipes.md").read_text()
    assert SEEDED_ROW.findall(page) == [
        (f"{float(rate):g}", str(entry["steps"]), f"{run['bits_per_byte']:.3f}",
         "".join(f" | {bits:.3f}" for bits in run["bits_by_seed"].values()))
        for report in measured
        for entry in report["budgets"]["2 minutes"].values()
        for rate, run in entry["runs"].items()
    ]  # fmt: skip
    for report in measured:
        seeds = " ".join(str(seed) for seed in report["seeds"])
        assert f"--seeds {seeds}" in " ".join(page.split()) and len(report["seeds"]) == 3


# A recipe's row at the larger scale: its name, steps, seconds a step, bits per byte (rate).
LARGE_ROW = re.compile(r"^\| [^|]+ \| (\d+) \| (\d\.\d{2}) \| (\d\.\d{3}) \((\S+)\) \|$", re.M)


def test_the_larger_scale_in_docs_training_is_what_benchmarks_recipes_large_measured():
    """docs/recipes.md: each recipe's steps, seconds a step and best bits per byte (rate) at the
    larger scale, and the steps the pipeline's recipe took to the AdamW recipe's final bits."""
    page = (ROOT / "docs" / "recipes.md").read_text()
    measured = [larger_scale(report) for report in LARGER_SCALE]
    assert LARGE_ROW.findall(page) == [
        (str(entry["steps"]), f"{entry['seconds_per_step']:.2f}",
         f"{entry['best_bits_per_byte']:.3f}", f"{entry['best_learning_rate']:g}")
        for report in measured
        for entry in report["recipes"].values()
    ]  # fmt: skip
    for report in measured:
        reached = report["pipeline_steps_to_adamw_final"]
        share = reached["share_of_adamw_steps"]
        assert f"in {reached['pipeline_steps']:.0f} of its steps, {share:.2f} of the AdamW" in (
            " ".join(page.split())
        )


def test_bfloat16_on_the_cpu_in_docs_training_is_what_benchmarks_cpu_bf16_measured():
    """docs/training.md: the step's and the product's ratios on each processor measured."""
    page = " ".join((ROOT / "docs" / "training.md").read_text().split())
    bench = ROOT / "reports" / "bench"
    avx2, amx = (json.loads((bench / f"{name}.json").read_text())
                 for name in ("cpu_bf16", "cpu_bf16_amx"))  # fmt: skip
    assert (avx2["cpu_capability"], amx["cpu_capability"]) == ("AVX2", "AVX512")
    step, product = (
        avx2[f"{what}_ratio_bf16_over_f32"]["of_medians"] for what in ("step", "matmul")
    )
    assert (
        f"takes {step:.1f} times the float32 step, and a matrix product {product:.0f} times" in page
    )
    step, product = (
        amx[f"{what}_ratio_bf16_over_f32"]["of_medians"] for what in ("step", "matmul")
    )
    assert f"takes {product:.2f} times float32's time, but the step takes {step:.2f} times" in page
