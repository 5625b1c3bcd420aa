"""A training run from checked inputs to its last checkpoint: the loop of updates, held-out
scores, atomic checkpoints, retention of the newest ones, and the run's per-step records.

The run directory is claimed first (`zrodlo.training.rundir`): locked, and refused where the run would
overwrite, cut or delete what it should not, before anything is written. Model train and checkpoint
resume both run through here, so they write the same files in the same way. In a data-parallel run
every process runs the loop and rank 0 alone claims the directory and writes.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from zrodlo.data.corpus import Corpus, release_pages
from zrodlo.data.text_size import bits, scored_text
from zrodlo.data.windows import WindowTable, scored_windows
from zrodlo.draws.chacha import GENERATOR
from zrodlo.model.directory import Model
from zrodlo.storage.outputs import check_in_place, check_parent, new_directory, remove_directory
from zrodlo.storage.refusal import Refusal, WriteFailure
from zrodlo.training.checkpoint import (
    check_removable,
    checkpoint_name,
    checkpoints_in,
    write_checkpoint,
)
from zrodlo.training.environment import environment
from zrodlo.training.plan import RunPlan
from zrodlo.training.records import RunLog, StepRecord
from zrodlo.training.rundir import RUN_FORMAT, claim, run_identity
from zrodlo.training.score import check_data, score
from zrodlo.training.step import Trainer, windows_digest


@dataclass(frozen=True)
class HeldOut:
    """A held-out corpus prepared for scoring: the corpus, its windows at the run's context, the
    (k,) windows every score reads, their digest where they are not all of them, and the UTF-8
    bytes of the text they score (what turns a score into bits per byte)."""

    corpus: Corpus
    table: WindowTable
    windows: np.ndarray
    digest: str | None
    text_bytes: int


def check_held_out(eval_corpus: Path | None, eval_every: int | None) -> None:
    if eval_corpus is not None and eval_every is None:
        raise Refusal("--eval-corpus needs --eval-every, the steps between held-out scores")
    if eval_every is not None and eval_corpus is None:
        raise Refusal("--eval-every needs --eval-corpus, the held-out corpus to score")


class HeldOutWarning(UserWarning):
    """--eval-windows asks for more windows than the held-out corpus has: each score reads all of
    them, and the run says so once, before its first step."""


def held_out_notices(held_out: HeldOut | None, plan: RunPlan) -> list[Warning]:
    asked = plan.eval_windows
    if held_out is None or asked is None or asked <= len(held_out.table):
        return []
    return [
        HeldOutWarning(
            f"--eval-windows {asked} is more than the {len(held_out.table)} windows of "
            f"{held_out.corpus.path} at --context {plan.context}; each score reads all of them"
        )
    ]


def open_held_out(eval_corpus: Path | None, model: Model, plan: RunPlan) -> HeldOut | None:
    if eval_corpus is None:
        return None
    corpus = Corpus.open(eval_corpus)
    table = check_data(corpus, model, plan.context)
    windows = scored_windows(len(table), plan.eval_windows, plan.seed)
    digest = windows_digest(windows) if len(windows) < len(table) else None
    text_bytes, _ = scored_text(corpus.tokens, table, windows, model.tokenizer)
    return HeldOut(corpus, table, windows, digest, text_bytes)


def fresh_provenance(start: Model, corpus_digest: str, plan: RunPlan) -> dict:
    """Where a fresh run comes from, as every trainer.json of it records: the run's identity, seed,
    and the corpus and tokenizer digests. A resumed run takes its checkpoint's instead."""
    return {
        "run": run_identity(GENERATOR, start, corpus_digest, plan),
        "seed": plan.seed,
        "corpus_digest": corpus_digest,
        "tokenizer_digest": start.tokenizer.digest,
    }


def run_updates(
    trainer: Trainer,
    plan: RunPlan,
    done: int,
    output: Path,
    model: Model,
    provenance: dict,
    held_out: HeldOut | None = None,
    on_step: Callable[[StepRecord], None] = lambda record: None,
    continues: dict[str, str] | None = None,
    timing: Path | None = None,
    corpus: Corpus | None = None,
    notices: list[Warning] | None = None,
) -> list[Path]:
    """Run updates done..plan.steps-1, writing checkpoints into `output`; return those written.

    `provenance` (run, seed, corpus and tokenizer digests) goes into run.json and every
    trainer.json; `continues` holds the file digests of the checkpoint a resume starts from;
    `timing` is the file the steps' wall-clock times go to, if not the run directory's; `corpus`
    is the training corpus, whose verifying pass (and the held-out corpus's) must pass before
    the run writes a record; `notices` are warned once the run directory is claimed, when the
    run goes on, not before a refusal that ends it.
    """
    run = {"format_version": RUN_FORMAT, "generator": GENERATOR, **provenance}
    run["hyperparameters"] = plan.hyperparameters()
    record_base = {key: value for key, value in run.items() if key != "format_version"}
    ranks = trainer.ranks
    record_base["environment"] = environment(trainer.device, ranks.world)
    written: list[Path] = []
    planned = set(plan.checkpoint_steps(done))
    reached = done
    read = [c for c in (corpus, held_out and held_out.corpus) if c is not None]
    vouched: set[Path] = set()  # checkpoints read whole or written here: retention reads none again
    with ExitStack() as writing:
        # Rank 0 alone claims the directory and writes; the others learn whether it may.
        if ranks.leads:
            try:
                if timing is not None:
                    check_timing(timing)
                vouched = writing.enter_context(claim(output, run, plan, done))
            except BaseException:  # a refusal, or anything else: the others must not wait on it
                ranks.agree(False)
                raise
        if not ranks.agree(True):
            raise Refusal(f"process 0 refused to write into {output}, and said why")
        for notice in notices if ranks.leads and notices else []:
            warnings.warn(notice, stacklevel=3)
        records = _Records(output, done, timing, continues, read) if ranks.leads else None
        try:
            for n in range(done, plan.steps):
                record = trainer.step(n)
                reached = record.step
                release_pages(trainer.tokens)  # a run over a corpus larger than memory
                if held_out is not None and plan.scores_at(record.step):
                    started = time.perf_counter()
                    heard = getattr(on_step, "scoring", None) if records is not None else None
                    held = score(
                        trainer.model, held_out.corpus.tokens, held_out.table, plan.micro_batch,
                        trainer.device, plan.precision, ranks, held_out.windows,
                        heard and partial(heard, record.step),
                    )  # fmt: skip
                    record = replace(
                        record, eval_loss=held.loss, eval_windows=held_out.digest,
                        eval_bits_per_byte=bits(held.summed, held_out.text_bytes),
                        eval_seconds=time.perf_counter() - started,
                    )  # fmt: skip
                if record.step in planned:
                    trainer.check_finite(record.step)
                    written.append(output / checkpoint_name(record.step))
                if records is None:
                    continue
                # The records of a step go down before its checkpoint: the log always reaches at
                # least as far as the newest checkpoint, and a resume drops what lies beyond it.
                records.step(record)
                on_step(record)
                if record.step in planned:
                    log = records.written()
                    record_of = {**record_base, "step": record.step}
                    files = _write_checkpoint(written[-1], trainer, model, record_of, log)
                    log.checkpoint(record.step, files)
                    vouched.add(written[-1])
                    _keep_newest(output, plan.keep_checkpoints, provenance["run"], vouched)
            if records is not None:
                records.written()
        except WriteFailure as failure:
            raise WriteFailure(failure.path, failure.error, _stopped(output, reached)) from None
        finally:
            if records is not None:
                records.close()
    return written


class _Records:
    """A run's records, held back until the corpora it reads have passed their verifying pass,
    then written as they come: a run whose corpus turns out changed stops with the corpus's
    refusal having written no record, as if it had been refused at the start."""

    def __init__(
        self,
        output: Path,
        done: int,
        timing: Path | None,
        continues: dict[str, str] | None,
        corpora: list[Corpus],
    ) -> None:
        self._open = (output, done, timing, continues)
        self._corpora = corpora
        for corpus in corpora:
            corpus.verify()  # starts the pass on a second thread
        self._log: RunLog | None = None
        self._pending: list[StepRecord] = []

    def step(self, record: StepRecord) -> None:
        self._pending.append(record)
        if self._log is not None or all(corpus.verify().done() for corpus in self._corpora):
            self.written()

    def written(self) -> RunLog:
        """Wait for the corpora to pass, write every record held back, and return the log."""
        if self._log is None:
            for corpus in self._corpora:
                corpus.verified()
            output, done, timing, continues = self._open
            self._log = RunLog(output, done, timing)
            if continues is not None:
                self._log.continue_from(done, continues)
        for record in self._pending:
            self._log.step(record)
        self._pending.clear()
        return self._log

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


def check_timing(timing: Path) -> None:
    """Refuse a timing file that cannot be written: a directory, a link, or one whose folders
    cannot be made or written in, before the run writes anything."""
    if timing.is_dir():
        raise Refusal(f"--timing {timing} is a directory; it names the file the step times go to")
    check_parent(timing)
    check_in_place(timing)


def _stopped(output: Path, step: int) -> str:
    """What a run that could not write says of where it stopped and how it continues."""
    checkpoints = checkpoints_in(output)
    if not checkpoints:
        return f"the run stopped at step {step}, before its first checkpoint"
    return (
        f"the run stopped at step {step}, and its newest checkpoint {checkpoints[-1][1]} "
        "continues it with zrodlo checkpoint resume"
    )


def _write_checkpoint(
    path: Path, trainer: Trainer, model: Model, record: dict, log: RunLog
) -> dict[str, str]:
    current = trainer.current(path, model)
    with new_directory(path) as partial:
        written = write_checkpoint(partial, current, trainer.optimizer_state(), record)
        log.sync()  # the records the checkpoint continues reach the disk before it appears
    return written["files"]


def _keep_newest(output: Path, keep: int | None, run: str, vouched: set[Path]) -> None:
    if keep is None:
        return
    checkpoints = checkpoints_in(output)
    for _, path in checkpoints[: max(len(checkpoints) - keep, 0)]:
        check_removable(path, run, vouched=path in vouched)
        remove_directory(path)
