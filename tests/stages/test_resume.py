"""`zrodlo checkpoint resume` through the real command: every refusal of its specification word for
word, damaged checkpoints refused with one sentence, and continued runs equal to uninterrupted ones;
`zrodlo checkpoint diff` on equal and on different runs.

Refusals run the console script's entry point in this process (`assert_refused_in_process`), a few
the installed script itself; every run that trains is the installed script in its own process.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from forgery import replace_member, rewrite_record, sha256
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.draws.chacha import GENERATOR

STATE_FILES = ("model.safetensors", "optimizer.safetensors")
CHECKPOINT_FILES = ("config.json", "tokenizer.json", "model.json", *STATE_FILES, "trainer.json")


@pytest.fixture
def run(tmp_path: Path, trained_run: Path) -> Path:
    """A copy of trained_run (step-2, step-4, step-6 of 6) in this test's directory."""
    return Path(shutil.copytree(trained_run, tmp_path / "run"))


@pytest.fixture
def refused(assert_refused_in_process, training_data, resume_args, tmp_path) -> Callable:
    """`refused(checkpoint, sentence)`: resuming it on the training corpus into a new directory to
    step 6 is refused with `sentence`, exit 1, and nothing written."""

    def check(checkpoint: Path, sentence: str, steps: int = 6, corpus: Path | None = None):
        args = resume_args(checkpoint, corpus or training_data.corpus, tmp_path / "resumed", steps)
        assert_refused_in_process(*args, sentence=sentence)

    return check


def corpus_digest(corpus: Path) -> str:
    return json.loads((corpus / "corpus.json").read_text())["corpus_digest"]


# The refusals of the specification, in its order.


def test_resume_refuses_a_model_directory_without_trainer_json(tmp_path, dropout_model, refused):
    model = Path(shutil.copytree(dropout_model, tmp_path / "model"))
    refused(model, f"{model} cannot be read; only a checkpoint can be resumed")


def test_resume_refuses_a_path_that_does_not_exist(tmp_path, refused):
    missing = tmp_path / "step-4"
    refused(missing, f"{missing} cannot be read; only a checkpoint can be resumed")


def test_the_console_script_prints_the_refusal_of_a_directory_without_trainer_json(
    tmp_path, run, training_data, resume_args, assert_refused
):
    checkpoint = run / "step-4"
    (checkpoint / "trainer.json").unlink()
    assert_refused(
        *resume_args(checkpoint, training_data.corpus, tmp_path / "resumed", 6),
        sentence=f"{checkpoint} cannot be read; only a checkpoint can be resumed",
    )


def test_resume_refuses_a_tokenizer_other_than_the_one_trained_with(tmp_path, run, refused):
    checkpoint = run / "step-4"
    other = tmp_path / "other-tokenizer"
    other.mkdir()
    trained = load_tokenizer(checkpoint)
    # A valid tokenizer of the same size, so only its content tells it apart.
    CharTokenizer(tuple(point + 1 for point in trained.points)).save(other)
    replace_member(checkpoint, "tokenizer.json", (other / "tokenizer.json").read_bytes())
    refused(
        checkpoint,
        f"{checkpoint / 'tokenizer.json'} is not the tokenizer {checkpoint} was trained with",
    )


def test_resume_refuses_another_corpus_naming_both_digests(
    run, other_corpus, training_data, refused
):
    refused(
        run / "step-4",
        f"{other_corpus} holds corpus {corpus_digest(other_corpus)}, and this checkpoint was "
        f"trained on corpus {corpus_digest(training_data.corpus)}; resume on the same corpus",
        corpus=other_corpus,
    )


@pytest.mark.parametrize("steps", [4, 3, 0])
def test_resume_refuses_steps_not_past_the_checkpoint(run, refused, steps):
    refused(run / "step-4", f"--steps {steps} is not past the 4 steps already done", steps=steps)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda record: record.__setitem__("generator", "mt19937/numpy-1"), "mt19937/numpy-1"),
        (
            lambda record: record.__setitem__("generator", "chacha20-rfc8439/zrodlo-draws-v1"),
            "chacha20-rfc8439/zrodlo-draws-v1",
        ),
        (lambda record: record.pop("generator"), "no named generator"),
        (lambda record: record.__setitem__("generator", None), "no named generator"),
    ],
    ids=["another generator", "the sorted window order", "no generator", "a null generator"],
)
def test_resume_refuses_a_checkpoint_drawn_from_another_generator(run, refused, change, named):
    checkpoint = run / "step-4"
    rewrite_record(checkpoint, change)
    refused(
        checkpoint,
        f"this checkpoint's 4 steps drew their window order and dropout masks from {named}, and "
        f"this build draws from {GENERATOR}; a resume would not continue the same run",
    )


def test_this_build_names_its_generator_chacha20():
    assert GENERATOR == "chacha20-rfc8439/zrodlo-draws-v2"


# Damaged checkpoints: one sentence each, never a traceback.


def altered(checkpoint: Path, name: str) -> str:
    member, record = checkpoint / name, checkpoint / "trainer.json"
    recorded = json.loads(record.read_text())["files"][name]
    return (
        f"{member} has sha256 {sha256(member.read_bytes())}, and {record} records {recorded}; "
        "the file was truncated or altered after the checkpoint was written"
    )


def test_resume_refuses_a_truncated_model_file(run, refused):
    checkpoint = run / "step-4"
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    refused(checkpoint, altered(checkpoint, "model.safetensors"))


def test_the_console_script_prints_one_sentence_for_a_truncated_model_file(
    tmp_path, run, training_data, resume_args, assert_refused
):
    checkpoint = run / "step-4"
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert_refused(
        *resume_args(checkpoint, training_data.corpus, tmp_path / "resumed", 6),
        sentence=altered(checkpoint, "model.safetensors"),
    )


def test_resume_refuses_one_flipped_byte_in_the_optimizer_state(run, refused):
    checkpoint = run / "step-4"
    state = checkpoint / "optimizer.safetensors"
    data = bytearray(state.read_bytes())
    data[len(data) - 7] ^= 0x01  # a bit of the last tensor's bytes, not of the header
    state.write_bytes(bytes(data))
    refused(checkpoint, altered(checkpoint, "optimizer.safetensors"))


@pytest.mark.parametrize("name", CHECKPOINT_FILES[:-1])
def test_resume_refuses_a_checkpoint_missing_a_file(run, refused, name):
    checkpoint = run / "step-4"
    (checkpoint / name).unlink()
    refused(
        checkpoint,
        f"{checkpoint / name} is missing; {checkpoint / 'trainer.json'} lists it as part of the "
        "checkpoint",
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [("step", 5), ("seed", 12), ("hyperparameters.learning_rate", 0.02)],
)
def test_resume_refuses_a_trainer_json_edited_after_it_was_written(run, refused, key, value):
    checkpoint = run / "step-4"
    file = checkpoint / "trainer.json"
    record = json.loads(file.read_text())
    *path, last = key.split(".")
    target = record
    for part in path:
        target = target[part]
    assert target[last] != value
    target[last] = value
    file.write_text(json.dumps(record, indent=2))
    refused(
        checkpoint,
        f"{file} does not match the digest it was written with; it was edited after the "
        "checkpoint was written, so the checkpoint cannot be trusted",
    )


def test_resume_refuses_a_trainer_json_that_is_not_json(run, refused):
    checkpoint = run / "step-4"
    file = checkpoint / "trainer.json"
    file.write_text(file.read_text()[:40])
    try:
        json.loads(file.read_text())
    except json.JSONDecodeError as error:
        reason = str(error)
    refused(checkpoint, f"{file} does not load as a checkpoint record: {reason}")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"vocab_size": 30}', "it has no positions"),
        (b"[1, 2]", "it holds a list, not an object of named values"),
        (b"{", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ],
    ids=["a missing field", "a list", "broken json"],
)
def test_resume_refuses_a_config_json_that_does_not_load(run, refused, content, reason):
    checkpoint = run / "step-4"
    replace_member(checkpoint, "config.json", content)
    refused(
        checkpoint,
        f"{checkpoint / 'config.json'} does not load as a model configuration: {reason}",
    )


def test_resume_refuses_a_model_file_that_is_not_safetensors_even_with_its_digest(run, refused):
    checkpoint = run / "step-4"
    data = (checkpoint / "model.safetensors").read_bytes()[:64]
    replace_member(checkpoint, "model.safetensors", data)
    length = int.from_bytes(data[:8], "little")
    refused(
        checkpoint,
        f"{checkpoint / 'model.safetensors'} does not load as safetensors: its header would be "
        f"{length} bytes, and only 56 follow",
    )


def test_resume_refuses_optimizer_state_that_does_not_fit_the_model(run, refused):
    checkpoint = run / "step-4"
    state = load_safetensors((checkpoint / "optimizer.safetensors").read_bytes())
    dropped = sorted(state)[0]
    del state[dropped]
    replace_member(checkpoint, "optimizer.safetensors", save_safetensors(state))
    refused(
        checkpoint,
        f"{checkpoint} holds optimizer state that does not fit its model: {dropped} is missing",
    )


# With --keep-checkpoints, the run directory's old checkpoints must be ones Zrodlo may delete:
# resume refuses exactly what model train refuses, with the same sentences.


def copy_checkpoint(run: Path, source: str, name: str) -> Path:
    return Path(shutil.copytree(run / source, run / name))


def add_foreign_file(run: Path) -> Path:
    (run / "step-2" / "notes.txt").write_text("mine\n")
    return run / "step-2"


def break_config(run: Path) -> Path:
    replace_member(run / "step-2", "config.json", b'{"vocab_size": 30}')
    return run / "step-2"


FOREIGN = {
    "no step count": (
        lambda run: copy_checkpoint(run, "step-2", "step-02"),
        "{run}/step-02 is named like a checkpoint, but 02 is no step count",
    ),
    "another step count": (
        lambda run: copy_checkpoint(run, "step-2", "step-3"),
        "{run}/step-3 records 2 steps, not the 3 its directory name states",
    ),
    "a config that does not load": (
        break_config,
        "{run}/step-2/config.json does not load as a model configuration: it has no positions",
    ),
    "a foreign file": (
        add_foreign_file,
        "{run}/step-2 holds notes.txt, which Zrodlo does not write into a checkpoint directory; "
        "move it out, then delete the checkpoint again",
    ),
}


@pytest.mark.parametrize("command", ["resume", "train"])
@pytest.mark.parametrize("case", list(FOREIGN))
def test_keep_checkpoints_refuses_an_old_checkpoint_zrodlo_cannot_vouch_for(
    run,
    training_data,
    dropout_model,
    resume_args,
    train_args,
    assert_refused_in_process,
    case,
    command,
):
    shutil.rmtree(run / "step-6")  # as if killed before step 6 was written
    spoil, sentence = FOREIGN[case]
    spoil(run)
    keep = {"--keep-checkpoints": 2}
    if command == "resume":
        args = resume_args(run / "step-4", training_data.corpus, run, 6, keep)
    else:
        args = train_args(dropout_model, training_data.corpus, run, 6, keep)
    assert_refused_in_process(*args, sentence=sentence.format(run=run))


@pytest.mark.slow
def test_without_keep_checkpoints_a_foreign_file_is_left_alone(
    tmp_path, run, training_data, resume_args, run_zrodlo
):
    shutil.rmtree(run / "step-6")
    add_foreign_file(run)
    args = resume_args(run / "step-4", training_data.corpus, run, 6, {"--checkpoint-every": 2})
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")
    assert stdout.endswith(
        f"continued {run / 'step-4'} to step 6; the last checkpoint is {run / 'step-6'}\n"
    )
    assert (run / "step-2" / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in run.glob("step-*")) == ["step-2", "step-4", "step-6"]


# Continued runs equal the run that was never interrupted.


def same_files(first: Path, second: Path, names) -> dict[str, bool]:
    return {name: (first / name).read_bytes() == (second / name).read_bytes() for name in names}


def test_a_resume_into_the_directory_it_was_killed_in_ends_equal_to_the_uninterrupted_run(
    tmp_path, run, trained_run, training_data, resume_args, run_zrodlo
):
    # Killed while writing step 6: its records are in steps.csv and ledger.jsonl, its checkpoint
    # is a temporary holding some of the files.
    shutil.rmtree(run / "step-6")
    leftover = run / ".step-6.partial-4194305"  # above any process id Linux hands out
    leftover.mkdir()
    shutil.copy(trained_run / "step-6" / "config.json", leftover)
    shutil.copy(trained_run / "step-6" / "model.safetensors", leftover)
    # And one of a step this resume never writes, left by an earlier kill.
    older = Path(shutil.copytree(run / "step-4", run / ".step-5.partial-4194306"))
    assert "6," in (run / "steps.csv").read_text().splitlines()[-1][:2]

    args = resume_args(run / "step-4", training_data.corpus, run, 6, {"--checkpoint-every": 2})
    returncode, _, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert (returncode, stderr) == (0, "")

    assert (run / "steps.csv").read_text() == (trained_run / "steps.csv").read_text()
    assert (run / "ledger.jsonl").read_text() == (trained_run / "ledger.jsonl").read_text()
    assert all(same_files(run / "step-6", trained_run / "step-6", STATE_FILES).values())
    assert not leftover.exists()
    assert not older.exists()
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in trained_run.iterdir())


def test_resume_refuses_a_temporary_left_by_a_write_killed_before_trainer_json(
    tmp_path, run, training_data, resume_args, assert_refused_in_process
):
    leftover = run / ".step-6.partial-4194305"
    leftover.mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        shutil.copy(run / "step-6" / name, leftover)
    assert_refused_in_process(
        *resume_args(leftover, training_data.corpus, tmp_path / "resumed", 8),
        sentence=f"{leftover} cannot be read; only a checkpoint can be resumed",
    )


def test_resume_refuses_a_temporary_even_when_a_kill_left_all_its_files_written(
    tmp_path, run, training_data, resume_args, run_zrodlo
):
    leftover = Path(shutil.copytree(run / "step-6", run / ".step-6.partial-4194305"))
    args = resume_args(leftover, training_data.corpus, tmp_path / "resumed", 8)
    returncode, stdout, stderr = run_zrodlo(*args, cwd=tmp_path)
    assert not (tmp_path / "resumed").exists()
    assert (returncode, stdout) == (1, "")
    assert stderr == (
        f"Error: {leftover} is a temporary that a write left unfinished; only a checkpoint "
        "renamed into place can be resumed\n"
    )


# `zrodlo checkpoint diff` names the first step where two runs part.


def diff(run_zrodlo, cwd: Path, *runs: Path) -> tuple[int, str, dict]:
    returncode, stdout, stderr = run_zrodlo("checkpoint", "diff", *runs, cwd=cwd)
    assert stderr == ""
    json_returncode, report, _ = run_zrodlo("checkpoint", "diff", *runs, "--json", cwd=cwd)
    assert json_returncode == returncode
    return returncode, stdout, json.loads(report)


@pytest.mark.slow
def test_diff_names_step_1_windows_for_shuffled_runs_with_different_seeds(
    tmp_path, trained_run, dropout_model, training_data, train_args, run_zrodlo
):
    other = tmp_path / "other"
    args = train_args(dropout_model, training_data.corpus, other, 2, {"--seed": 12})
    assert run_zrodlo(*args, cwd=tmp_path)[0] == 0
    returncode, stdout, report = diff(run_zrodlo, tmp_path, trained_run, other)
    assert (returncode, stdout) == (1, "the runs part at step 1: windows differs\n")
    assert (report["first_differing_step"], report["field"], report["equal"]) == (
        1,
        "windows",
        False,
    )
    assert report["steps_compared"] == 2


@pytest.mark.slow
def test_diff_names_step_1_loss_for_runs_in_corpus_order_with_different_seeds(
    tmp_path, dropout_model, training_data, train_args, run_zrodlo
):
    """In corpus order both seeds read the same windows; their dropout masks differ."""
    runs = [tmp_path / "seed-11", tmp_path / "seed-12"]
    for run, seed in zip(runs, (11, 12), strict=True):
        flags = {"--seed": seed, "--shuffle": None}
        assert (
            run_zrodlo(
                *train_args(dropout_model, training_data.corpus, run, 1, flags), cwd=tmp_path
            )[0]
            == 0
        )
    returncode, stdout, report = diff(run_zrodlo, tmp_path, *runs)
    assert (returncode, stdout) == (1, "the runs part at step 1: loss differs\n")
    assert (report["first_differing_step"], report["field"], report["equal"]) == (1, "loss", False)


# A trainer.json whose own digest matches, as a build with other code could write it: its fields
# are checked all the same, before any file it names is read.


@pytest.mark.parametrize("name", ["/etc/hostname", "../../secret.txt", "notes.txt"])
def test_resume_refuses_a_trainer_json_listing_a_file_no_checkpoint_holds(run, refused, name):
    checkpoint = run / "step-4"
    rewrite_record(checkpoint, lambda record: record["files"].__setitem__(name, sha256(b"")))
    refused(
        checkpoint,
        f"{checkpoint / 'trainer.json'} lists {name!r}, which is no file of a checkpoint; a "
        "checkpoint lists only config.json, tokenizer.json, model.safetensors, model.json, "
        "optimizer.safetensors",
    )


@pytest.mark.parametrize(
    ("step", "shown"),
    [("abc", '"abc"'), (None, "null"), (float("nan"), "NaN"), (-1, "-1"), (True, "true"),
     (5.7, "5.7"), (0, "0")],
)  # fmt: skip
def test_resume_refuses_a_trainer_json_whose_step_is_no_count_of_updates(run, refused, step, shown):
    checkpoint = run / "step-4"
    rewrite_record(checkpoint, lambda record: record.__setitem__("step", step))
    refused(
        checkpoint,
        f"{checkpoint / 'trainer.json'} records step {shown}; a checkpoint's step is a whole "
        "number of 1 or more",
    )


@pytest.mark.parametrize(
    ("environment", "sentence"),
    [
        ([], "records an environment that is not an object of named values"),
        ({"threads": 10**20}, "records 100000000000000000000 threads; a run computes on 1 to 1024 threads"),
        ({"threads": 100000}, "records 100000 threads; a run computes on 1 to 1024 threads"),
        ({"threads": True}, "records true threads; a run computes on 1 to 1024 threads"),
    ],
)  # fmt: skip
def test_resume_refuses_a_recorded_environment_no_run_had(run, refused, environment, sentence):
    checkpoint = run / "step-4"
    rewrite_record(checkpoint, lambda record: record.__setitem__("environment", environment))
    refused(checkpoint, f"{checkpoint / 'trainer.json'} {sentence}")


@pytest.mark.slow
def test_a_resume_on_other_software_or_another_processor_warns_once_and_goes_on(
    tmp_path, run, trained_run, training_data, resume_args, run_zrodlo
):
    checkpoint = run / "step-4"
    here = json.loads((checkpoint / "trainer.json").read_text())["environment"]
    elsewhere = {"torch": "2.12.0", "processor": "Another (family 1, model 2)"}
    # Kernels other than this machine's, whichever it has.
    elsewhere["cpu_capability"] = "AVX2" if here["cpu_capability"] != "AVX2" else "AVX512"
    rewrite_record(checkpoint, lambda record: record["environment"].update(elsewhere))
    output = tmp_path / "resumed"
    returncode, _, stderr = run_zrodlo(
        *resume_args(checkpoint, training_data.corpus, output, 6), cwd=tmp_path
    )
    assert returncode == 0
    assert stderr == (
        f"warning: {checkpoint} was written with torch 2.12.0 and this is torch "
        f"{torch.__version__}; with processor Another (family 1, model 2) and this is "
        f"{here['processor']}; with CPU kernels {elsewhere['cpu_capability']} and this is "
        f"{here['cpu_capability']}; the "
        "run continues, but equality with the uninterrupted run is promised only with the same "
        "torch version, processor, thread count and device\n"
    )
    # On this machine nothing that rounds has changed, so the continuation is still exact.
    assert all(same_files(output / "step-6", trained_run / "step-6", STATE_FILES).values())


def test_resume_refuses_a_shuffle_that_is_no_switch(run, refused):
    checkpoint = run / "step-4"
    rewrite_record(checkpoint, lambda record: record["hyperparameters"].__setitem__("shuffle", 0))
    refused(
        checkpoint,
        f"{checkpoint} records hyperparameters no run can have: --shuffle is 0; it is a switch, "
        "on or off",
    )


def test_resume_refuses_adamw_step_counts_other_than_the_checkpoints_step(run, refused):
    checkpoint = run / "step-4"
    state = load_safetensors((checkpoint / "optimizer.safetensors").read_bytes())
    name = sorted(key for key in state if key.endswith(".step"))[0]
    state[name] = torch.tensor(3.0)
    replace_member(checkpoint, "optimizer.safetensors", save_safetensors(state))
    refused(
        checkpoint,
        f"{checkpoint} holds optimizer state that does not fit its model: {name} counts 3 "
        "updates, and the checkpoint records 4",
    )
