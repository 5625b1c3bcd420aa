"""How a data-parallel run shares work out: contiguous blocks in rank order, and the refusals."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from zrodlo.storage.refusal import Refusal
from zrodlo.training.ranks import Ranks, check_processes, check_share


@given(count=st.integers(0, 200), world=st.integers(1, 16))
def test_blocks_cover_every_item_once_in_rank_order_and_differ_by_one_at_most(count, world):
    blocks = [Ranks(rank, world).block(count) for rank in range(world)]
    assert [i for block in blocks for i in block] == list(range(count))
    sizes = {len(block) for block in blocks}
    assert max(sizes) - min(sizes) <= 1


def test_alone_the_sum_is_the_left_fold_in_micro_batch_order():
    parts = [torch.tensor([1e8, 1.0]), torch.tensor([1.0, 1e8]), torch.tensor([-1e8, -1e8])]
    total = Ranks().ordered_sum(parts)
    assert total.tolist() == ((parts[0] + parts[1]) + parts[2]).tolist()
    assert [p.tolist() for p in parts] == [[1e8, 1.0], [1.0, 1e8], [-1e8, -1e8]]  # untouched


def test_a_world_that_does_not_divide_the_micro_batches_is_refused():
    check_share(4, batch_size=32, micro_batch=4)
    with pytest.raises(Refusal) as refused:
        check_share(3, batch_size=32, micro_batch=4)
    assert refused.value.sentence == (
        "3 processes do not divide the 8 micro-batches of a step (--batch-size 32 in "
        "micro-batches of 4); every process computes an equal share of each step"
    )
    with pytest.raises(Refusal) as refused:
        check_processes(0)
    assert refused.value.sentence == "--processes is 0; it must be a whole number of one or more"
