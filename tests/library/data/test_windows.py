"""Windows: the textbook example, every target once, no crossing, and the order of every step."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import window_order
from zrodlo.data.batches import IGNORED, collate
from zrodlo.data.windows import WindowStream, build_windows, check_context, scored_windows
from zrodlo.draws import chacha
from zrodlo.draws.bijection import bijection
from zrodlo.storage.refusal import Refusal

BOS, EOS = 1, 2


def every_window(table) -> tuple[np.ndarray, np.ndarray]:
    """(starts, target_counts) of every window of the table, in corpus order."""
    return table.locate(np.arange(len(table)))


def corpus(lengths: list[int], dtype: type = np.int32) -> tuple[np.ndarray, np.ndarray]:
    """Documents of the given character counts, characters numbered 3, 4, ... throughout."""
    offsets = np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64) + 2)])
    tokens = np.empty(offsets[-1], dtype=dtype)
    next_char = 3
    for d, n in enumerate(lengths):
        start = offsets[d]
        tokens[start] = BOS
        tokens[start + 1 : start + 1 + n] = np.arange(next_char, next_char + n) % 1000 + 3
        tokens[start + 1 + n] = EOS
        next_char += n
    return tokens, offsets


def test_textbook_example_1() -> None:
    tokens = np.array([1, 3, 4, 5, 6, 7, 2, 1, 3, 2], dtype=np.int32)
    offsets = np.array([0, 7, 10])
    table = build_windows(offsets, 4)
    starts, counts = every_window(table)
    assert starts.tolist() == [0, 3, 7]
    assert counts.tolist() == [3, 3, 2]
    inputs, targets = collate(tokens, table, np.arange(3))
    assert inputs.dtype == torch.int64 and targets.dtype == torch.int64
    assert inputs.tolist() == [[1, 3, 4], [5, 6, 7], [1, 3, EOS]]
    assert targets.tolist() == [[3, 4, 5], [6, 7, 2], [3, 2, IGNORED]]
    assert int((targets != IGNORED).sum()) == 8
    # The chapter's batch of the first and the short window.
    inputs, targets = collate(tokens, table, np.array([0, 2]))
    assert inputs.tolist() == [[1, 3, 4], [1, 3, 2]]
    assert targets.tolist() == [[3, 4, 5], [3, 2, IGNORED]]


documents = st.lists(st.integers(0, 30), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(lengths=documents, context=st.integers(2, 12))
def test_every_target_once_and_no_window_crosses_a_document(
    lengths: list[int], context: int
) -> None:
    tokens, offsets = corpus(lengths)
    if offsets[-1] < context:
        with pytest.raises(Refusal):
            build_windows(offsets, context)
        return
    table = build_windows(offsets, context)
    inputs, targets = collate(tokens, table, np.arange(len(table)))
    assert inputs.shape == targets.shape == (len(table), context - 1)
    starts, counts = every_window(table)
    document = np.searchsorted(offsets, starts, side="right") - 1  # (W,)
    # The window's last target lies inside its own document.
    assert (starts + counts < offsets[document + 1]).all()
    assert ((counts >= 1) & (counts <= context - 1)).all()
    for d in range(len(lengths)):
        mine = document == d
        scored = targets[torch.from_numpy(mine)]
        assert (
            scored[scored != IGNORED].tolist() == tokens[offsets[d] + 1 : offsets[d + 1]].tolist()
        )
        read = inputs[torch.from_numpy(mine)]
        # Each window reads its own document's tokens up to its last target, then EOS.
        assert read[:, 0].tolist() == tokens[starts[mine]].tolist()
    padded = targets == IGNORED
    assert (inputs[padded] == EOS).all()
    # Padding only ever follows the real positions.
    assert (padded.int().diff(dim=1) >= 0).all()


def test_windows_start_every_context_minus_one_tokens() -> None:
    _, offsets = corpus([9, 1])  # 11 tokens, then 3
    starts, counts = every_window(build_windows(offsets, 4))
    assert starts.tolist() == [0, 3, 6, 9, 11]
    assert counts.tolist() == [3, 3, 3, 1, 2]


def test_the_table_holds_its_documents_not_its_windows() -> None:
    offsets = np.array([0, 2, 2 + 10**9 + 1, 2 + 10**9 + 3])  # a document of a billion targets
    table = build_windows(offsets, 1001)
    assert len(table) == 1 + 10**6 + 1
    assert {a.shape for a in (table.doc_starts, table.doc_targets)} == {(3,)}
    starts, counts = table.locate(np.array([0, 1, 10**6, 10**6 + 1]))
    assert starts.tolist() == [0, 2, 2 + (10**6 - 1) * 1000, 2 + 10**9 + 1]
    assert counts.tolist() == [1, 1000, 1000, 1]


def test_unsigned_memory_mapped_tokens(tmp_path) -> None:
    tokens, offsets = corpus([5, 3, 8], dtype=np.uint32)
    path = tmp_path / "tokens.u32"
    tokens.tofile(path)
    mapped = np.memmap(path, dtype=np.uint32, mode="r")
    table = build_windows(offsets, 5)
    a = collate(mapped, table, np.arange(len(table)))
    b = collate(tokens.astype(np.int64), table, np.arange(len(table)))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_collate_moves_to_the_device() -> None:
    tokens, offsets = corpus([5])
    table = build_windows(offsets, 3)
    inputs, targets = collate(tokens, table, np.array([0, 1]), device="cpu")
    assert inputs.device.type == targets.device.type == "cpu"


@pytest.mark.parametrize("context", [1, 0, -3])
def test_context_below_two_is_refused(context: int) -> None:
    sentence = (
        f"--context {context} leaves no token to read before the one predicted; "
        "it needs two or more"
    )
    with pytest.raises(Refusal) as caught:
        check_context(context)
    assert caught.value.sentence == sentence
    with pytest.raises(Refusal) as caught:
        build_windows(np.array([0, 5]), context)
    assert caught.value.sentence == sentence


@pytest.mark.parametrize(
    ("offsets", "context", "total"),
    [([0, 3, 5], 6, 5), ([0], 2, 0), ([], 4, 0), ([0, 2], 3, 2)],
)
def test_a_corpus_shorter_than_one_window_is_refused(
    offsets: list[int], context: int, total: int
) -> None:
    with pytest.raises(Refusal) as caught:
        build_windows(np.array(offsets, dtype=np.int64), context)
    assert caught.value.sentence == (
        f"the corpus holds {total} tokens, fewer than one window of --context {context}"
    )


def test_a_corpus_of_exactly_one_window_is_accepted() -> None:
    table = build_windows(np.array([0, 3, 5]), 5)
    assert every_window(table)[1].tolist() == [2, 1]


# --- the order of windows and the windows of each step ---


def test_no_shuffle_reads_corpus_order_across_passes() -> None:
    stream = WindowStream(count=5, batch_size=3, seed=7, shuffle=False)
    steps = [stream.indices(n).tolist() for n in range(4)]
    assert steps == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 0, 1]]
    assert window_order(4, 3, 7, shuffle=False).tolist() == [0, 1, 2, 3]


def test_shuffled_order_is_a_permutation_drawn_from_seed_and_pass() -> None:
    a = window_order(50, 0, seed=11, shuffle=True)
    assert sorted(a.tolist()) == list(range(50))
    assert a.dtype == np.int64
    assert np.array_equal(a, window_order(50, 0, seed=11, shuffle=True))
    assert not np.array_equal(a, window_order(50, 1, seed=11, shuffle=True))
    assert not np.array_equal(a, window_order(50, 0, seed=12, shuffle=True))


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 40),
    batch=st.integers(1, 50),
    seed=st.integers(0, 2**64 - 1),
    shuffle=st.booleans(),
)
def test_each_pass_reads_every_window_once_and_steps_are_fixed_size(
    count: int, batch: int, seed: int, shuffle: bool
) -> None:
    stream = WindowStream(count, batch, seed, shuffle)
    passes = 3
    steps = -(-passes * count // batch)
    flat = np.concatenate([stream.indices(n) for n in range(steps)])  # (steps*B,)
    assert all(stream.indices(n).shape == (batch,) for n in range(3))
    for p in range(passes):
        one_pass = flat[p * count : (p + 1) * count]
        assert sorted(one_pass.tolist()) == list(range(count))
        assert one_pass.tolist() == window_order(count, p, seed, shuffle).tolist()


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(1, 30),
    batch=st.integers(1, 40),
    seed=st.integers(0, 2**32),
    step=st.integers(0, 25),
)
@pytest.mark.slow
def test_a_step_computed_cold_equals_the_step_after_all_before_it(
    count: int, batch: int, seed: int, step: int
) -> None:
    warm = WindowStream(count, batch, seed, shuffle=True)
    for n in range(step):
        warm.indices(n)
    cold = WindowStream(count, batch, seed, shuffle=True)
    assert np.array_equal(cold.indices(step), warm.indices(step))


def test_a_step_of_a_trillion_windows_is_computed_from_its_positions_alone() -> None:
    # An order held as an array would take 8 TB here; the bijection evaluates the 64 positions.
    count = 10**12 + 39
    stream = WindowStream(count, batch_size=64, seed=3, shuffle=True)
    step = count // 64  # its positions straddle the end of pass 0 and the start of pass 1
    indices = stream.indices(step)
    assert indices.shape == (64,) and ((indices >= 0) & (indices < count)).all()
    position = step * 64 + np.arange(64)
    for p in (0, 1):
        here = position // count == p
        expected = bijection(
            chacha.Stream(3, chacha.Purpose.WINDOW_ORDER, a=p), count, position[here] % count
        )
        assert np.array_equal(indices[here], expected)


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(1, 60),
    batches=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    seed=st.integers(0, 2**64 - 1),
)
def test_the_order_does_not_depend_on_the_batch_size(count, batches, seed) -> None:
    positions = 3 * count
    streams = []
    for batch in batches:
        stream = WindowStream(count, batch, seed, shuffle=True)
        steps = -(-positions // batch)
        streams.append(np.concatenate([stream.indices(n) for n in range(steps)])[:positions])
    assert np.array_equal(*streams)


def test_shuffled_passes_differ_and_seeds_differ() -> None:
    a = WindowStream(count=30, batch_size=30, seed=5, shuffle=True)
    b = WindowStream(count=30, batch_size=30, seed=6, shuffle=True)
    assert not np.array_equal(a.indices(0), a.indices(1))
    assert not np.array_equal(a.indices(0), b.indices(0))
    assert np.array_equal(a.indices(4), WindowStream(30, 30, 5, True).indices(4))


def test_negative_step_is_an_error() -> None:
    with pytest.raises(ValueError):
        WindowStream(3, 2, 0, False).indices(-1)


@given(count=st.integers(1, 5000), size=st.integers(1, 6000), seed=st.integers(0, 2**64 - 1))
def test_scored_windows_are_a_sorted_draw_without_repeats(count, size, seed) -> None:
    """`size` distinct windows of `count` in corpus order, all of them where size >= count, and
    the same on every call: what every held-out score of a run reads."""
    chosen = scored_windows(count, size, seed)
    assert len(chosen) == min(count, size)
    assert np.all(np.diff(chosen) > 0) and chosen.min() >= 0 and chosen.max() < count
    assert np.array_equal(chosen, scored_windows(count, size, seed))
    if size >= count:
        assert np.array_equal(chosen, np.arange(count))


def test_scored_windows_reach_every_window_evenly() -> None:
    """Over 4,000 seeds, each of 10 windows is among 3 drawn about 3/10 of the time: a chi-square
    of 9 degrees of freedom below 27.9 (p = 0.001)."""
    counts = np.zeros(10)
    for seed in range(4000):
        counts[scored_windows(10, 3, seed)] += 1
    expected = 4000 * 3 / 10
    assert ((counts - expected) ** 2 / expected).sum() < 27.9
