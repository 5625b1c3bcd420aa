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
