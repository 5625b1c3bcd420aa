"""The run loop's order of writes: what must be on disk before a checkpoint appears."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from zrodlo.data.corpus import Corpus
from zrodlo.training.checkpoint import CHECKPOINT_FILES, read_model
from zrodlo.training.loop import fresh_provenance, run_updates
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

RECORDS = {"steps.csv", "ledger.jsonl", "timing.csv", "held_out.csv"}


def test_the_records_and_the_checkpoint_files_are_synced_before_it_is_renamed_into_place(
    tmp_path, training_data, dropout_model, small_plan, monkeypatch
):
    plan = small_plan(checkpoint_every=1)
    model, corpus = read_model(dropout_model), Corpus.open(training_data.corpus)
    table = check_data(corpus, model, plan.context)
    trainer = Trainer.start(plan, model, corpus.tokens, table, torch.device("cpu"))
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("sync", Path(os.readlink(f"/proc/self/fd/{fd}")).name))
        real_fsync(fd)

    def rename(source, target, **kwargs) -> None:
        events.append(("rename", Path(target).name))
        real_rename(source, target, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    run_updates(
        trainer, plan, 0, tmp_path / "run", model, fresh_provenance(model, corpus.digest, plan)
    )
    monkeypatch.undo()

    start = 0
    for step in (1, 2, 3):
        renamed = events.index(("rename", f"step-{step}"))
        synced = {name for kind, name in events[start:renamed] if kind == "sync"}
        assert synced >= RECORDS | set(CHECKPOINT_FILES), (step, synced)
        start = renamed


def test_retention_reads_no_checkpoint_twice(
    tmp_path, training_data, dropout_model, small_plan, monkeypatch
):
    """A run into its own directory with --keep-checkpoints reads each checkpoint there whole once
    (when it claims the directory), and the ones it writes never: deleting them costs no hash."""
    from zrodlo.storage import hashed

    plan = small_plan(steps=6, checkpoint_every=1, keep_checkpoints=2)
    model, corpus = read_model(dropout_model), Corpus.open(training_data.corpus)
    table = check_data(corpus, model, plan.context)
    provenance = fresh_provenance(model, corpus.digest, plan)
    first = small_plan(steps=3, checkpoint_every=1, keep_checkpoints=2)
    trainer = Trainer.start(first, model, corpus.tokens, table, torch.device("cpu"))
    run_updates(trainer, first, 0, tmp_path / "run", model, provenance)
    read: list[Path] = []
    real = hashed.read_hashed

    def counting(paths: list[Path]) -> list:
        read.extend(paths)
        return real(paths)

    monkeypatch.setattr(hashed, "read_hashed", counting)
    trainer = Trainer.start(plan, model, corpus.tokens, table, torch.device("cpu"))
    for n in range(3):
        trainer.step(n)
    run_updates(trainer, plan, 3, tmp_path / "run", model, provenance)
    weights = [path for path in read if path.name == "model.safetensors"]
    assert sorted(p.parent.name for p in weights) == ["step-2", "step-3"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.is_dir()) == [
        "step-5",
        "step-6",
    ]
