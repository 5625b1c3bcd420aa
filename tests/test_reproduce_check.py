"""The CI reproduction check's comparisons: each fails on what it guards (a reproduced output hash
other than the committed one, a score more than 1% off, another environment), and passes on the
committed results compared with themselves. The check as a whole is what CI runs after the tests."""

import copy
import importlib.util
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def load_check():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / ".ci" / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed_lock() -> dict:
    return yaml.safe_load((ROOT / "dvc.lock").read_text())


def committed_metrics() -> dict:
    return json.loads((ROOT / "reports/metrics.json").read_text())


def test_the_committed_results_agree_with_themselves():
    check = load_check()
    lock, metrics = committed_lock(), committed_metrics()
    assert check.differing_outputs(lock, copy.deepcopy(lock), lock["stages"]) == []
    assert check.score_differences(metrics, copy.deepcopy(metrics)) == []


def test_a_changed_corpus_digest_fails_the_check():
    check = load_check()
    lock = committed_lock()
    reproduced = copy.deepcopy(lock)
    out = reproduced["stages"]["prepare@validation"]["outs"][0]
    out["md5"] = "0" * 32 + ".dir"
    problems = check.differing_outputs(lock, reproduced, check.EXACT_EVERYWHERE)
    assert len(problems) == 1
    assert problems[0].startswith("stage prepare@validation output corpus/validation")


def test_a_lock_without_the_init_stage_fails_the_check():
    check = load_check()
    lock = committed_lock()
    stripped = copy.deepcopy(lock)
    del stripped["stages"]["init"]
    assert check.differing_outputs(stripped, lock, ["init"]) == [
        "the committed dvc.lock records no outputs for stage init"
    ]


def test_a_score_more_than_one_percent_off_fails_the_check_and_one_within_it_passes():
    check = load_check()
    metrics = committed_metrics()
    near, far = copy.deepcopy(metrics), copy.deepcopy(metrics)
    loss = metrics["test"]["loss"]
    near["test"]["loss"] = loss * 1.009
    far["test"]["loss"] = loss * 1.011
    assert check.score_differences(metrics, near) == []
    assert check.score_differences(metrics, far) == [
        f".test.loss: committed {loss}, reproduced {loss * 1.011}, more than 1% apart"
    ]


def test_the_environment_is_read_from_the_reports_settings_table():
    check = load_check()
    environment = check.environment_of((ROOT / "reports/report.md").read_text())
    assert set(environment) == set(check.ENVIRONMENT)
    assert environment["torch"].startswith("2.13.0")
    assert environment["threads"] == "2"
    assert all(environment[name] for name in ("python", "machine", "processor", "cpu_capability"))
