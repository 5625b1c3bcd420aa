"""Reference computations the tests hold the product to: written from the specifications, kept out
of the package, since nothing but the tests needs them."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from zrodlo.data.windows import pass_stream
from zrodlo.draws.bijection import bijection
from zrodlo.draws.chacha import Stream, check_block_args, initial_state
from zrodlo.draws.masks import block_words


def keystream_torch(
    key: bytes, nonce: bytes, counter: int, blocks: int, device: torch.device
) -> torch.Tensor:
    """The words of `zrodlo.draws.chacha.keystream` computed with torch integer ops on `device`:
    an int64 tensor (blocks*16,) whose values are the uint32 words."""
    check_block_args(key, counter, nonce, blocks)
    init = torch.tensor(initial_state(key, 0, nonce), dtype=torch.int64, device=device)
    return block_words(init, counter, blocks)


def permutation(stream: Stream, n: int) -> np.ndarray:
    """int64 permutation of range(n), shape (n,): element i is where the keyed bijection takes i."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ValueError(f"n is {n!r}; it must be a whole number, not negative")
    if n == 0:
        return np.empty(0, dtype=np.int64)
    return bijection(stream, int(n), np.arange(int(n), dtype=np.int64))


def window_order(count: int, pass_index: int, seed: int, shuffle: bool) -> np.ndarray:
    """The whole order (count,) int64 in which pass `pass_index` reads the windows: corpus order
    without shuffling, otherwise the keyed bijection of (seed, pass) at every position."""
    if not shuffle:
        return np.arange(count, dtype=np.int64)
    return permutation(pass_stream(seed, pass_index), count)


def transformers_loss(model, corpus_path, context: int) -> float:
    """The mean loss per target a transformers causal LM gives every window of a prepared corpus
    at `context`, computed by transformers' forward pass and torch's cross-entropy."""
    import torch.nn.functional as F

    from zrodlo.data.batches import collate
    from zrodlo.data.corpus import Corpus
    from zrodlo.data.windows import build_windows

    corpus = Corpus.open(corpus_path)
    table = build_windows(corpus.offsets, context)
    inputs, targets = collate(corpus.tokens, table, np.arange(len(table)))  # (windows, C-1) each
    with torch.no_grad():
        logits = model.eval()(inputs).logits  # (windows, C-1, vocab)
    summed = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum")
    return summed.item() / int((targets != -100).sum())


def bpe_merges(counts: dict[str, int], symbols_wanted: int) -> list[tuple[str, str]]:
    """Byte-level BPE by its definition, slowly: count every pair of neighbouring symbols in
    every piece (weighted by the piece's count) before each merge, take the most frequent (a tie
    to the pair whose left, then right, symbol's bytes come first), and rewrite each piece left
    to right; stop when `symbols_wanted` distinct new symbols exist or no pair is left. Pieces
    are written in GPT-2's byte stand-ins, one per byte."""
    from zrodlo.data.tokenizer.bpe_training import byte_symbols

    byte_of = {symbol: byte for byte, symbol in enumerate(byte_symbols())}

    def spelled(symbol: str) -> bytes:
        return bytes(byte_of[c] for c in symbol)

    pieces = [(list(piece), weight) for piece, weight in counts.items()]
    learned: list[tuple[str, str]] = []
    made: set[str] = set()
    while len(made) < symbols_wanted:
        tally: dict[tuple[str, str], int] = {}
        for symbols, weight in pieces:
            for pair in itertools.pairwise(symbols):
                tally[pair] = tally.get(pair, 0) + weight
        if not tally:
            break
        best = min(tally, key=lambda p: (-tally[p], spelled(p[0]), spelled(p[1])))
        learned.append(best)
        made.add(best[0] + best[1])
        for index, (symbols, weight) in enumerate(pieces):
            rewritten, at = [], 0
            while at < len(symbols):
                if tuple(symbols[at : at + 2]) == best:
                    rewritten.append(best[0] + best[1])
                    at += 2
                else:
                    rewritten.append(symbols[at])
                    at += 1
            pieces[index] = (rewritten, weight)
    return learned
