"""Writing and reading a checkpoint, sha256 included, against raw I/O of as many bytes.

For the medium model (4.8 M parameters) and a 100 M-parameter one, with AdamW moments of the same
shapes: `write_checkpoint` into a new directory (the way a run writes, synced and renamed) against
one write and fsync of the same number of bytes, and `read_checkpoint` with the page cache emptied
against one cold read of a file of that size, each pair in turn (A B A B ...). Figures go to
reports/bench/checkpoint_io.json; the target is a share of raw of 0.8 or more, both ways.

Both are bounded by sha256 of the bytes, which only a second core can overlap with the I/O, so the
report also gives that hash's own time as a share of raw, and `cores_at_hand`: how much faster the
hash ran split over two threads (2 where the machine gave two cores meanwhile, 1 where it gave one).

    .venv/bin/python benchmarks/checkpoint_io.py [--repeats 5] [--sizes medium 100M]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import measure
import numpy as np
import torch

from zrodlo.data.tokenizer.char import CharTokenizer
from zrodlo.draws.chacha import GENERATOR
from zrodlo.model.config import ModelConfig
from zrodlo.model.decoder import Decoder
from zrodlo.model.directory import Model
from zrodlo.storage.outputs import new_directory
from zrodlo.training.checkpoint import read_checkpoint, write_checkpoint

SIZES = {
    "medium": {"d_model": 256, "layers": 6, "heads": 8, "d_ff": 1024},
    "100M": {"d_model": 768, "layers": 14, "heads": 12, "d_ff": 3072},
}
SEED = 1  # benchmark data only


def drop_cache(paths: list[Path]) -> None:
    """Evict the files' pages from the page cache so the next read comes from the disk."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def files_of(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file())


def state_of(config: ModelConfig) -> tuple[dict, dict]:
    """Random weights of the configuration's shapes and AdamW state for them."""
    generator = torch.Generator().manual_seed(SEED)
    with torch.device("meta"):
        shapes = {name: p.shape for name, p in Decoder(config).named_parameters()}
    weights = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
    state = {}
    for name, shape in shapes.items():
        state[f"{name}.exp_avg"] = torch.randn(shape, generator=generator)
        state[f"{name}.exp_avg_sq"] = torch.rand(shape, generator=generator)
        state[f"{name}.step"] = torch.tensor(1.0)
    return weights, state


def against_raw(write: Callable[[], Path], work: Path, repeats: int) -> dict:
    """`write()` writes a checkpoint into a new directory and returns it; that write, and
    `read_checkpoint` of its result with the page cache emptied, each in turn with raw I/O of as
    many bytes: one write and fsync, one cold read. Beside them, sha256 of as many bytes, alone
    and split in halves on two threads, which tells how many cores the machine gave meanwhile."""
    kept = write()
    size = sum(p.stat().st_size for p in files_of(kept))
    payload = np.random.default_rng(SEED).bytes(size)
    raw = work / "raw.bin"
    raw.write_bytes(payload)

    def zrodlo_write() -> float:
        written: list[Path] = []
        seconds = measure.timed(lambda: written.append(write()))
        shutil.rmtree(written[0])
        return seconds

    def raw_write() -> float:
        target = work / "raw-write.bin"

        def action() -> None:
            with open(target, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())

        seconds = measure.timed(action)
        target.unlink()
        return seconds

    def raw_read() -> None:
        with open(raw, "rb") as handle:
            handle.read()

    def cold(paths: list[Path], action) -> float:
        drop_cache(paths)
        return measure.timed(action)

    def sha256_in_halves() -> None:
        """The same work as sha256 of the bytes, on two threads: as fast as that alone when the
        machine gives this process two cores at the moment, twice as slow when it gives one."""
        view = memoryview(payload)
        with ThreadPoolExecutor(max_workers=1) as other:
            half = other.submit(lambda: hashlib.sha256(view[: size // 2]).digest())
            hashlib.sha256(view[size // 2 :]).digest()
            half.result()

    variants = {
        "zrodlo_write_checkpoint": zrodlo_write,
        "raw_write_fsync": raw_write,
        "zrodlo_read_checkpoint_cold": lambda: cold(files_of(kept), lambda: read_checkpoint(kept)),
        "raw_read_cold": lambda: cold([raw], raw_read),
        "sha256_alone": lambda: measure.timed(lambda: hashlib.sha256(payload).digest()),
        "sha256_halves_on_two_threads": lambda: measure.timed(sha256_in_halves),
    }
    measure.interleave(variants, 1)  # warm-up
    samples = measure.interleave(variants, repeats)
    rates = {key: round(size / statistics.median(v) / 1e6, 1) for key, v in samples.items()}
    return {
        "bytes": size,
        "files": {p.name: p.stat().st_size for p in files_of(kept)},
        "seconds": {key: measure.summary(v) for key, v in samples.items()},
        "megabytes_per_second": rates,
        "share_of_raw": {
            "write": measure.ratios(samples["raw_write_fsync"], samples["zrodlo_write_checkpoint"]),
            "read_cold": measure.ratios(
                samples["raw_read_cold"], samples["zrodlo_read_checkpoint_cold"]
            ),
        },
        # What bounds the shares: a write or read can go no faster than sha256 of its bytes
        # alone, and that hash overlaps the I/O only as far as a second core is free to run it.
        "sha256_alone_share_of_raw": {
            "write": measure.ratios(samples["raw_write_fsync"], samples["sha256_alone"]),
            "read_cold": measure.ratios(samples["raw_read_cold"], samples["sha256_alone"]),
        },
        "cores_at_hand": measure.ratios(
            samples["sha256_alone"], samples["sha256_halves_on_two_threads"]
        ),
    }


def measure_size(name: str, work: Path, repeats: int) -> dict:
    tokenizer = CharTokenizer.fit(["abcdefghijklmnopqrstuvwxyz .,"])
    config = ModelConfig(vocab_size=tokenizer.vocab_size, positions=256, dropout=0.0,
                         attention_dropout=0.0, **SIZES[name])  # fmt: skip
    weights, state = state_of(config)
    record = {"generator": GENERATOR, "run": "0" * 64, "seed": SEED, "step": 1}
    directory = work / name
    directory.mkdir()
    count = iter(range(10**6))

    def write() -> Path:
        path = directory / f"copy-{next(count)}"
        with new_directory(path) as partial:
            write_checkpoint(partial, Model(path, config, tokenizer, weights), state, record)
        return path

    parameters = sum(t.numel() for t in weights.values())
    return {"parameters": parameters, **against_raw(write, directory, repeats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["medium", "100M"])
    parser.add_argument("--output", type=Path, default=measure.REPORTS / "checkpoint_io.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zrodlo-bench-checkpoint-"))
    try:
        sizes = {name: measure_size(name, work, args.repeats) for name in args.sizes}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    measure.write_report(
        args.output,
        {
            "benchmark": "checkpoint write and read against raw I/O of as many bytes",
            "sizes": sizes,
            "machine": measure.machine(),
        },
    )


if __name__ == "__main__":
    main()
