"""The run log: records cut back to a step from the end, and the comparison of two ledgers."""

import json

import pytest

from zrodlo.evaluation.compare import compare_ledgers
from zrodlo.training.records import (
    LEDGER_FILE,
    STEPS_FILE,
    RunLog,
    StepRecord,
    last_record,
    read_ledger,
)


def record(step: int, loss: float = 1.5, eval_loss: float | None = None) -> StepRecord:
    bits = None if eval_loss is None else eval_loss / 2
    return StepRecord(
        step, loss, 0.01, 2.0, 100, f"{step:064x}", 0.5, eval_loss, eval_bits_per_byte=bits
    )


def write_run(run, steps: int, checkpoints=()) -> None:
    log = RunLog(run, 0)
    for step in range(1, steps + 1):
        log.step(record(step, eval_loss=1.0 if step % 2 == 0 else None))
        if step in checkpoints:
            log.checkpoint(step, {"model.safetensors": f"{step:064x}"})
    log.close()


def test_continuing_after_a_step_drops_the_later_records_of_every_file(tmp_path):
    write_run(tmp_path, 9, checkpoints=(3, 6))
    RunLog(tmp_path, 6).close()
    steps = (tmp_path / STEPS_FILE).read_text().splitlines()
    assert steps[0].startswith("step,") and [line.split(",")[0] for line in steps[1:]] == [
        str(n) for n in range(1, 7)
    ]
    ledger = read_ledger(tmp_path / LEDGER_FILE)
    assert ledger[-1] == {"step": 6, "checkpoint": {"model.safetensors": f"{6:064x}"}}
    assert max(entry["step"] for entry in ledger) == 6
    held_out = (tmp_path / "held_out.csv").read_text().splitlines()
    assert held_out == ["step,eval_loss,eval_bits_per_byte", "2,1.0,0.5", "4,1.0,0.5", "6,1.0,0.5"]
    assert steps[:3] == [
        "step,loss,learning_rate,grad_norm,targets,eval_loss,eval_bits_per_byte",
        "1,1.5,0.01,2.0,100,,",
        "2,1.5,0.01,2.0,100,1.0,0.5",
    ]


def test_a_run_of_a_release_up_to_0_1_continues_in_its_own_columns(tmp_path):
    """steps.csv and held_out.csv as 0.1.0 wrote them (no bits per byte): a run continued in the
    directory appends rows of the file's own columns, so each file stays one table."""
    (tmp_path / STEPS_FILE).write_text(
        "step,loss,learning_rate,grad_norm,targets,eval_loss\n1,1.5,0.01,2.0,100,\n"
        "2,1.5,0.01,2.0,100,1.0\n3,1.5,0.01,2.0,100,\n"
    )
    (tmp_path / "held_out.csv").write_text("step,eval_loss\n2,1.0\n")
    log = RunLog(tmp_path, 2)
    log.step(record(3))
    log.step(record(4, eval_loss=0.75))
    log.close()
    assert (tmp_path / STEPS_FILE).read_text().splitlines() == [
        "step,loss,learning_rate,grad_norm,targets,eval_loss",
        "1,1.5,0.01,2.0,100,",
        "2,1.5,0.01,2.0,100,1.0",
        "3,1.5,0.01,2.0,100,",
        "4,1.5,0.01,2.0,100,0.75",
    ]
    assert (tmp_path / "held_out.csv").read_text().splitlines() == [
        "step,eval_loss", "2,1.0", "4,0.75",
    ]  # fmt: skip


def test_a_half_written_last_line_is_dropped(tmp_path):
    write_run(tmp_path, 4)
    with open(tmp_path / LEDGER_FILE, "a") as handle:
        handle.write('{"step": 5, "windo')
    RunLog(tmp_path, 4).close()
    text = (tmp_path / LEDGER_FILE).read_text()
    assert text.endswith("\n") and [e["step"] for e in read_ledger(tmp_path / LEDGER_FILE)] == [
        1,
        2,
        3,
        4,
    ]


def test_records_longer_than_one_read_block_are_cut_exactly(tmp_path):
    write_run(tmp_path, 3000)
    before = (tmp_path / STEPS_FILE).read_text().splitlines()
    RunLog(tmp_path, 1234).close()
    assert (tmp_path / STEPS_FILE).read_text().splitlines() == before[: 1234 + 1]
    assert json.loads(last_record(tmp_path / LEDGER_FILE))["step"] == 1234


def test_continuing_after_the_last_step_changes_nothing(tmp_path):
    write_run(tmp_path, 5)
    before = {name: (tmp_path / name).read_bytes() for name in (STEPS_FILE, LEDGER_FILE)}
    RunLog(tmp_path, 5).close()
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


@pytest.mark.parametrize("field", ["windows", "loss"])
def test_compare_names_the_first_step_where_two_ledgers_part(field):
    first = [{"step": n, "windows": "a", "loss": "0x1p+0"} for n in range(1, 6)]
    second = [dict(entry) for entry in first]
    second[2][field] = "other"
    comparison = compare_ledgers(first, second)
    assert (comparison.steps_compared, comparison.first_difference, comparison.field) == (
        5,
        3,
        field,
    )


def test_compare_checks_the_checkpoints_both_runs_wrote():
    first = [{"step": 1, "loss": "a"}, {"step": 1, "checkpoint": {"model.safetensors": "x"}}]
    second = [{"step": 1, "loss": "a"}, {"step": 1, "checkpoint": {"model.safetensors": "y"}}]
    comparison = compare_ledgers(first, second)
    assert comparison.first_difference == 1 and comparison.field == "model.safetensors"
    assert comparison.to_json()["equal"] is False
