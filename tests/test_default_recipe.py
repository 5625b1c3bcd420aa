"""The pipeline's recipe is the one benchmarks/recipes.py measured best, and the AdamW recipe it
replaced is still one `dvc exp run` away: docs/training.md's, proved to be those params exactly."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import yaml
from doc_experiments import experiment_params, params_with

from zrodlo.pipeline.check import check_params
from zrodlo.storage.refusal import Refusal

ROOT = Path(__file__).resolve().parent.parent
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
DEFAULT = "new recipe, SwiGLU"  # benchmarks/recipe_runs.py's name of the pipeline's recipe


@pytest.fixture(scope="module")
def benchmarks():
    """benchmarks/measure.py and recipe_runs.py as modules, as the benchmarks import each other."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        yield importlib.import_module("measure"), importlib.import_module("recipe_runs")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def measured(report: str) -> dict:
    return json.loads((ROOT / "reports" / "bench" / f"{report}.json").read_text())["budgets"]


def test_the_committed_params_are_the_recipe_measured_best_at_its_best_rate(benchmarks):
    measure, recipes = benchmarks
    recipe = recipes.RECIPES[DEFAULT]
    params = measure.adamw_params()
    for report in ("recipes", "recipes_4_minutes", "recipes_python"):
        for budget, entries in measured(report).items():
            best = min(entries, key=lambda name: entries[name]["best_bits_per_byte"])
            assert best == DEFAULT, (report, budget)
    rate = measured("recipes")["2 minutes"][DEFAULT]["best_learning_rate"]
    train = params["train"] | recipe.train | {"learning_rate": rate}
    assert (PARAMS["init"], PARAMS["train"]) == (params["init"] | recipe.init, train)


def test_the_adamw_recipe_as_docs_training_gives_it_is_the_benchmarks_adamw_recipe(
    benchmarks, tmp_path
):
    measure, _ = benchmarks
    changes = experiment_params("training.md", "## The AdamW recipe in the pipeline")
    assert changes == {"init": measure.ADAMW_INIT, "train": measure.ADAMW_TRAIN}
    check_params(params_with(tmp_path, **changes), tmp_path / "rules.txt")


def test_adapters_as_docs_adapters_gives_them_are_params_that_agree(tmp_path):
    """Adapters train with AdamW: docs/adapters.md's experiment is accepted, and the committed
    params with the rank alone are refused, naming what to set."""
    with pytest.raises(Refusal) as refused:
        check_params(params_with(tmp_path, train={"lora_rank": 8}), tmp_path / "rules.txt")
    assert str(refused.value) == (
        "train.optimizer muon trains whole matrices, and train.lora_rank trains adapters; "
        "adapters train with train.optimizer adamw"
    )
    adapters = experiment_params("adapters.md", "an experiment of")["train"]
    check_params(params_with(tmp_path, train=adapters), tmp_path / "rules.txt")
