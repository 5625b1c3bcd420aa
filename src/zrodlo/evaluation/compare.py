"""Two runs compared step by step (`zrodlo checkpoint diff`): the first step where their ledgers
part, and what differs there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zrodlo.storage.digest import json_text
from zrodlo.storage.outputs import check_replaceable, replace_file
from zrodlo.storage.refusal import Refusal
from zrodlo.training.records import LEDGER_FILE, read_ledger


@dataclass(frozen=True)
class LedgerComparison:
    """Two runs compared on the steps both recorded, and on the checkpoints both wrote."""

    steps_compared: int
    first_difference: int | None  # the first step whose records differ, or None
    field: str | None  # what differs there
    checkpoint_step: int | None = None  # the newest checkpoint both runs wrote
    digests: tuple[dict, dict] | None = None  # its state files' sha256 in each run

    def to_json(self) -> dict:
        return {
            "steps_compared": self.steps_compared,
            "first_differing_step": self.first_difference,
            "field": self.field,
            "equal": self.first_difference is None,
            "checkpoint_step": self.checkpoint_step,
            "digests": None if self.digests is None else list(self.digests),
        }


def compare_ledgers(first: list[dict], second: list[dict]) -> LedgerComparison:
    """Compare two ledgers on the steps both hold, and the checkpoints both wrote, step by step."""
    steps_a = {e["step"]: e for e in first if "checkpoint" not in e}
    steps_b = {e["step"]: e for e in second if "checkpoint" not in e}
    saved_a = {e["step"]: e["checkpoint"] for e in first if "checkpoint" in e}
    saved_b = {e["step"]: e["checkpoint"] for e in second if "checkpoint" in e}
    common = sorted(set(steps_a) & set(steps_b))
    both_saved = sorted(set(saved_a) & set(saved_b))
    last = both_saved[-1] if both_saved else None
    found = {
        "checkpoint_step": last,
        "digests": None if last is None else (saved_a[last], saved_b[last]),
    }
    for step in sorted(set(common) | set(both_saved)):
        for field in ("windows", "loss", "learning_rate", "grad_norm", "eval_loss", "eval_windows"):
            if (
                step in steps_a
                and step in steps_b
                and steps_a[step].get(field) != steps_b[step].get(field)
            ):
                return LedgerComparison(len(common), step, field, **found)
        if step in saved_a and step in saved_b:
            for name in sorted(set(saved_a[step]) | set(saved_b[step])):
                if saved_a[step].get(name) != saved_b[step].get(name):
                    return LedgerComparison(len(common), step, name, **found)
    return LedgerComparison(len(common), None, None, **found)


def diff(first: Path, second: Path, output: Path | None = None) -> LedgerComparison:
    """Compare the ledgers of the run directories `first` and `second` on the steps both recorded;
    with `output`, also write the comparison there as JSON (replacing any earlier file)."""
    if output is not None:
        check_replaceable(output)
    ledgers = []
    for run in (first, second):
        if not (run / LEDGER_FILE).is_file():
            raise Refusal(f"{run} holds no {LEDGER_FILE}; only a run directory can be compared")
        ledgers.append(read_ledger(run / LEDGER_FILE))
    comparison = compare_ledgers(*ledgers)
    if output is not None:
        replace_file(output, json_text({"runs": [str(first), str(second)], **comparison.to_json()}))
    return comparison
