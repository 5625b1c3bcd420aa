"""The Python API (`zrodlo.api`): one function per command, whose keywords are the command's options
with the command's defaults, writing what the command writes, byte for byte; and data-parallel
runs started from a script or `python -c`, equal to one process on the command line."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap

import click
import pytest
import torch
import typer

from zrodlo import api
from zrodlo.stages.cli import app
from zrodlo.training.schedule import ScheduleWarning

STEPS = 4
# The conftest's TRAIN_FLAGS as keywords, on one thread like the command below.
PLAN = dict(
    steps=STEPS, context=9, batch_size=4, micro_batch_size=2, learning_rate=0.01, beta1=0.9,
    beta2=0.99, epsilon=1e-8, weight_decay=0.1, decay_scope="matrices", seed=11, precision="f32",
    warmup_steps=2, decay_steps=10, decay_shape="cosine", min_learning_rate=0.001, clip_norm=0.5,
    shuffle=True, checkpoint_every=2,
)  # fmt: skip
# Each command and the function of the API that is it.
COMMANDS = {
    ("documents", "torch-docs"): api.torch_docs, ("documents", "import"): api.import_documents,
    ("documents", "assign"): api.assign, ("documents", "split"): api.split,
    ("tokenizer", "fit"): api.fit_tokenizer, ("tokenizer", "import"): api.import_tokenizer,
    ("corpus", "prepare"): api.prepare,
    ("model", "init"): api.init, ("model", "train"): api.train, ("model", "evaluate"): api.evaluate,
    ("model", "sample"): api.sample, ("model", "export"): api.export,
    ("model", "import"): api.import_model,
    ("checkpoint", "resume"): api.resume, ("checkpoint", "diff"): api.diff, ("report",): api.report,
    ("pipeline", "check"): api.check_params,
}  # fmt: skip
# What only the command line has: how it prints (--json); and what the API takes that the command
# line gives itself: a run's progress as a function, and the commands' options, which pipeline
# check holds the params' keys to.
PRINTING = {"json_output"}
ONLY_THE_API = {"progress", "options"}


@pytest.fixture(autouse=True)
def own_threads():
    """train and resume set this process's thread count; the tests after these keep theirs."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def files_of(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def command_of(words: tuple[str, ...]) -> click.Command:
    command = typer.main.get_command(app)
    for word in words:
        command = command.commands[word]
    return command


@pytest.mark.parametrize("words", list(COMMANDS), ids=" ".join)
def test_every_command_is_a_function_with_its_options_and_defaults(words):
    options = {
        param.name: (None if param.required else param.default)
        for param in command_of(words).params
        if param.name not in PRINTING
    }
    function = inspect.signature(COMMANDS[words]).parameters.values()
    keywords = {
        p.name: (None if p.default is inspect.Parameter.empty else p.default)
        for p in function
        if p.name not in ONLY_THE_API
    }
    assert keywords == options


def test_prepare_writes_the_corpus_the_command_writes(training_data, tmp_path):
    manifest = api.prepare(training_data.documents, training_data.tokenizer, tmp_path / "corpus")
    assert files_of(tmp_path / "corpus") == files_of(training_data.corpus)
    recorded = json.loads((training_data.corpus / "corpus.json").read_text())
    assert manifest["corpus_digest"] == recorded["corpus_digest"]


@pytest.mark.slow
def test_train_and_resume_write_the_runs_the_commands_write(
    training_data, dropout_model, train_args, run_zrodlo, tmp_path, capsys
):
    """And show the command's progress, a line a step where no terminal is, unless quiet."""
    by_command = tmp_path / "by-command"
    flags = {"--checkpoint-every": 2, "--threads": 1}
    returncode, shown, stderr = run_zrodlo(
        *train_args(dropout_model, training_data.corpus, by_command, STEPS, flags), cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    by_api = tmp_path / "by-api"
    capsys.readouterr()
    written = api.train(
        dropout_model, training_data.corpus, by_api, device="cpu", threads=1, **PLAN
    )
    assert written == [by_api / "step-2", by_api / "step-4"]
    steps = [step_line(line) for line in capsys.readouterr().out.splitlines()]
    assert steps == [step_line(line) for line in shown.splitlines()[:STEPS]]
    assert steps[-1].startswith(f"step {STEPS}/{STEPS}  loss ")
    for step in ("step-2", "step-4"):
        assert files_of(by_api / step) == files_of(by_command / step), step
    resumed = api.resume(
        by_api / "step-2", training_data.corpus, tmp_path / "resumed", steps=STEPS, device="cpu",
        checkpoint_every=2, progress=api.quiet,
    )  # fmt: skip
    assert resumed == [tmp_path / "resumed" / "step-4"]
    assert capsys.readouterr().out == ""
    for name in ("model.safetensors", "optimizer.safetensors"):
        ours, theirs = tmp_path / "resumed" / "step-4" / name, by_command / "step-4" / name
        assert ours.read_bytes() == theirs.read_bytes()


def step_line(line: str) -> str:
    """A step's progress line less its speed, which no two runs share."""
    return re.sub(r"  [0-9,]+ tokens/s", "", line)


@pytest.mark.parametrize("processes", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_schedule_that_ends_after_the_run_is_warned_as_such(
    training_data, dropout_model, processes, tmp_path, monkeypatch
):
    """The ScheduleWarning reaches the caller as itself, from worker processes too, so that a
    script can filter it as any warning."""
    monkeypatch.delenv("PYTHONWARNINGS")  # the workers' filter (conftest.py), taken off
    sentence = (
        f"the learning-rate schedule ends after update 12 (--warmup-steps 2, --decay-steps 10), "
        f"and --steps is {STEPS}: the rate never reaches --min-learning-rate 0.001; the run goes on"
    )
    with pytest.warns(ScheduleWarning) as heard:
        api.train(
            dropout_model, training_data.corpus, tmp_path / "run", device="cpu", threads=1,
            processes=processes, **PLAN,
        )  # fmt: skip
    assert [str(warning.message) for warning in heard] == [sentence]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["script", "python -c"])
def test_processes_started_from_a_script_make_the_one_process_run(
    how, training_data, dropout_model, train_args, run_zrodlo, tmp_path
):
    """Two workers that run the library's entry point, never the caller's code: from a script
    file and from `python -c` (what a notebook kernel is like: no script to run again)."""
    alone = tmp_path / "alone"
    flags = {"--checkpoint-every": 2, "--threads": 1}
    returncode, _, stderr = run_zrodlo(
        *train_args(dropout_model, training_data.corpus, alone, STEPS, flags), cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    code = textwrap.dedent(f"""
        from pathlib import Path
        from zrodlo import api

        steps = []
        def progress(done, total):
            import contextlib
            return contextlib.nullcontext(lambda record: steps.append(record.step))

        if __name__ == "__main__":
            written = api.train(
                Path({str(dropout_model)!r}), Path({str(training_data.corpus)!r}), Path("run"),
                device="cpu", processes=2, threads=1, progress=progress, **{PLAN!r})
            resumed = api.resume(
                Path("run/step-2"), Path({str(training_data.corpus)!r}), Path("resumed"),
                steps={STEPS}, device="cpu", processes=2, checkpoint_every=2, progress=api.quiet)
            print(written, resumed, steps)
    """)  # fmt: skip
    if how == "script":
        (tmp_path / "mine.py").write_text(code)
        command = [sys.executable, "mine.py"]
    else:
        command = [sys.executable, "-c", code]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "[PosixPath('run/step-2'), PosixPath('run/step-4')] "
        "[PosixPath('resumed/step-4')] [1, 2, 3, 4]"
    )
    for step in ("step-2", "step-4"):
        for name in ("model.safetensors", "optimizer.safetensors"):
            ours, theirs = tmp_path / "run" / step / name, alone / step / name
            assert ours.read_bytes() == theirs.read_bytes(), (step, name)
    resumed = tmp_path / "resumed" / "step-4" / "model.safetensors"
    assert resumed.read_bytes() == (alone / "step-4" / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_evaluate_returns_and_writes_the_scores_the_command_writes(
    trained_run, training_data, run_zrodlo, tmp_path
):
    model, written = trained_run / "step-6", tmp_path / "scores.json"
    returncode, _, stderr = run_zrodlo(
        "model", "evaluate", "--model", model, "--corpus", training_data.held_out,
        "--baseline", training_data.corpus, "--context", 9, "--output", written, cwd=tmp_path,
    )  # fmt: skip
    assert (returncode, stderr) == (0, ""), stderr
    ours = tmp_path / "ours.json"
    scores = api.evaluate(
        model, [training_data.held_out], 9, baseline=training_data.corpus, output=ours
    )
    assert scores == json.loads(written.read_text())
    assert ours.read_bytes() == written.read_bytes()


@pytest.mark.slow
def test_sample_returns_the_text_the_command_prints(trained_run, run_zrodlo, tmp_path):
    model = trained_run / "step-6"
    returncode, stdout, _ = run_zrodlo(
        "model", "sample", "--model", model, "--prompt", "the", "--tokens", 12, "--seed", 3,
        cwd=tmp_path,
    )  # fmt: skip
    assert returncode == 0
    assert "the" + api.sample(model, "the", tokens=12, seed=3) + "\n" == stdout


@pytest.mark.slow
def test_export_writes_the_directory_the_command_writes(trained_run, run_zrodlo, tmp_path):
    pytest.importorskip("tokenizers")
    model = trained_run / "step-6"
    returncode, _, stderr = run_zrodlo(
        "model", "export", "--model", model, "--output", tmp_path / "by-command", cwd=tmp_path
    )
    assert (returncode, stderr) == (0, ""), stderr
    assert api.export(model, tmp_path / "by-api") == tmp_path / "by-api"
    assert files_of(tmp_path / "by-api") == files_of(tmp_path / "by-command")


def test_a_refusal_is_raised_with_the_commands_sentence(training_data, tmp_path):
    with pytest.raises(api.Refusal) as refused:
        api.prepare(training_data.documents, training_data.tokenizer, training_data.corpus)
    assert refused.value.sentence == (
        f"{training_data.corpus} already exists; Zrodlo writes a new directory and overwrites "
        "nothing"
    )


@pytest.mark.slow
def test_a_refusal_of_the_workers_is_raised_in_the_caller(training_data, dropout_model, tmp_path):
    with pytest.raises(api.Refusal) as refused:
        api.train(
            dropout_model, training_data.corpus, tmp_path / "run", device="cpu", processes=2,
            threads=1, **{**PLAN, "context": 30},
        )  # fmt: skip
    assert refused.value.sentence == (
        "--context 30 makes the model read 29 tokens, more than the 16 positions its "
        "configuration states"
    )
    assert not (tmp_path / "run").exists()
