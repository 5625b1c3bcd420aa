"""One worker of benchmarks/distributed.py, started by torchrun: a few real `Trainer.step`s of a
data-parallel run, with Zrodlo's exact reduction or with the all_reduce torch's DDP makes.

    distributed_worker.py <corpus> <config json> <result json>

Rank 0 writes the run's figures into <result json>: the median step's tokens/s (its first step
left out), the gradient's bytes and every rank's peak RSS.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
from train import SEED, model_config, plan_for

from zrodlo.data.corpus import Corpus
from zrodlo.data.tokenizer import load_tokenizer
from zrodlo.model.directory import Model
from zrodlo.model.weights import initial_weights
from zrodlo.training.ranks import Ranks, join
from zrodlo.training.score import check_data
from zrodlo.training.step import Trainer

CPU = torch.device("cpu")


class AllReduceRanks(Ranks):
    """The ranks of a run whose gradient is summed as DDP sums it: each rank adds its own
    micro-batches, then one all_reduce adds the ranks' sums in the order gloo's ring picks."""

    def ordered_sum(self, gradients: list[torch.Tensor]) -> torch.Tensor:
        total = gradients[0].clone()
        for gradient in gradients[1:]:
            total.add_(gradient)
        dist.all_reduce(total)
        return total


def peak_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    corpus_path, config_text, result = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    size = json.loads(config_text)
    corpus = Corpus.open(corpus_path)
    tokenizer = load_tokenizer(corpus_path.parent / "tokenizer")
    config = model_config(size, tokenizer.vocab_size)
    model = Model(Path("model"), config, tokenizer, initial_weights(config, SEED))
    plan = replace(plan_for(size, size["steps"]), micro_batch_size=size["micro_batch"])
    ranks = join(CPU)
    if size["reduction"] == "all_reduce":
        ranks = AllReduceRanks(ranks.rank, ranks.world, CPU)
    table = check_data(corpus, model, size["context"])
    trainer = Trainer.start(plan, model, corpus.tokens, table, CPU, ranks)
    seconds = [trainer.step(n).seconds for n in range(size["steps"])]
    peaks = ranks.gather([float(peak_rss_bytes())], ranks.world)
    if ranks.leads:
        gradient_bytes = sum(p.numel() * 4 for p in trainer.parameters)
        step = statistics.median(seconds[1:])
        figures = {
            "processes": ranks.world,
            "reduction": size["reduction"],
            "tokens_per_second": plan.batch_size * (size["context"] - 1) / step,
            "step_seconds": step,
            "gradient_bytes": gradient_bytes,
            "peak_rss_bytes_per_rank_max": max(peaks),
            "micro_batches_per_rank": plan.batch_size // plan.micro_batch // ranks.world,
        }
        result.write_text(json.dumps(figures), encoding="utf-8")
    if ranks.world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
