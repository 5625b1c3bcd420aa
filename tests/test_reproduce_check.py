"""The CI reproduction check fails when a reproduced digest differs from the committed dvc.lock."""

import copy
import importlib.util
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


def test_the_committed_lock_agrees_with_itself():
    check = load_check()
    lock = committed_lock()
    assert check.compare_locks(lock, copy.deepcopy(lock)) == []


def test_a_changed_corpus_digest_fails_the_check():
    check = load_check()
    lock = committed_lock()
    reproduced = copy.deepcopy(lock)
    out = reproduced["stages"]["prepare@validation"]["outs"][0]
    out["md5"] = "0" * 32 + ".dir"
    problems = check.compare_locks(lock, reproduced)
    assert len(problems) == 1
    assert problems[0].startswith("stage prepare@validation output corpus/validation")


def test_a_lock_without_the_init_stage_fails_the_check():
    check = load_check()
    lock = committed_lock()
    stripped = copy.deepcopy(lock)
    del stripped["stages"]["init"]
    assert check.compare_locks(stripped, lock) == [
        "the committed dvc.lock records no outputs for stage init"
    ]
