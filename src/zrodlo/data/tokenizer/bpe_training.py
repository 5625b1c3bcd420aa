"""Fitting a byte-level BPE, deterministic to the byte: the same training documents give the same
merges on every machine, at any thread count and hash seed.

Texts are split into pieces by GPT-2's pre-tokenizer (`PIECES`), each piece taken as its UTF-8
bytes; the pieces are counted, and the pair of neighbouring symbols that occurs most often across
them is merged into a new symbol, until the vocabulary has its size. A tie between equally frequent
pairs goes to the pair whose bytes come first: the left symbol's bytes compared first, then the
right's, as byte strings. Nothing depends on the order of a hash table: pieces are kept in the order
they were first seen, and the choice of a pair depends on counts and bytes alone.

Each merge rewrites only the pieces that hold its pair and updates the counts of the pairs they
held, so its cost follows the text it touches, not the whole corpus.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from tokenizers import pre_tokenizers

# GPT-2's split, as the tokenizers library applies it: runs of letters, runs of digits, runs of
# other characters, each with the one space before it, English contractions, and runs of
# whitespace (the last space of a run goes with the word after it). Words stay whole and a merge
# never crosses from a word into punctuation, so the vocabulary spends its entries on words.
PIECES = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def byte_symbols() -> list[str]:
    """GPT-2's printable stand-in for each byte, in byte order: the printable Latin-1 characters
    stand for themselves, and the other bytes, in order, for U+0100 onwards."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    symbols, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            symbols[byte] = chr(byte)
        else:
            symbols[byte] = chr(256 + extra)
            extra += 1
    return [symbols[byte] for byte in range(256)]


def count_pieces(texts: Iterable[str]) -> dict[str, int]:
    """How often each piece occurs, written in the byte stand-ins, in the order first seen."""
    counts: dict[str, int] = {}
    for text in texts:
        for piece, _ in PIECES.pre_tokenize_str(text):
            counts[piece] = counts.get(piece, 0) + 1
    return counts


def fit_merges(counts: dict[str, int], symbols_wanted: int) -> list[tuple[str, str]]:
    """The merges learned from the piece counts until they have made `symbols_wanted` new
    symbols, each a pair of symbols (strings of byte stand-ins) in the order learned; fewer where
    no pair is left to merge. Two merges may spell the same bytes ("ab" "c" and "a" "bc"): they
    make one symbol, which both then stand for."""
    stand_in = byte_symbols()
    byte_of = {symbol: byte for byte, symbol in enumerate(stand_in)}
    symbols: list[str] = list(stand_in)  # symbol id -> its text
    raw: list[bytes] = [bytes([byte]) for byte in range(256)]  # symbol id -> its bytes
    id_of = {symbol: index for index, symbol in enumerate(symbols)}
    pieces = [[byte_of[c] for c in piece] for piece in counts]  # (pieces, symbols of each)
    weights = list(counts.values())
    pair_count: dict[tuple[int, int], int] = {}
    holders: dict[tuple[int, int], set[int]] = {}
    for index, piece in enumerate(pieces):
        for pair in itertools.pairwise(piece):
            pair_count[pair] = pair_count.get(pair, 0) + weights[index]
            holders.setdefault(pair, set()).add(index)
    queue = [(-count, raw[a], raw[b], a, b) for (a, b), count in pair_count.items()]
    heapq.heapify(queue)
    learned: list[tuple[str, str]] = []
    while queue and len(symbols) - 256 < symbols_wanted:
        negative, _, _, a, b = heapq.heappop(queue)
        if pair_count.get((a, b), 0) != -negative or negative == 0:
            continue  # an entry left from before the pair's count changed
        learned.append((symbols[a], symbols[b]))
        text = symbols[a] + symbols[b]
        if text not in id_of:
            id_of[text] = len(symbols)
            symbols.append(text)
            raw.append(raw[a] + raw[b])
        merged = id_of[text]
        changed: set[tuple[int, int]] = set()
        for index in sorted(holders.pop((a, b), ())):
            piece, weight = pieces[index], weights[index]
            for pair in itertools.pairwise(piece):
                pair_count[pair] -= weight
                changed.add(pair)
            rewritten, at = [], 0
            while at < len(piece):
                if at + 1 < len(piece) and piece[at] == a and piece[at + 1] == b:
                    rewritten.append(merged)
                    at += 2
                else:
                    rewritten.append(piece[at])
                    at += 1
            pieces[index] = rewritten
            for pair in itertools.pairwise(rewritten):
                pair_count[pair] = pair_count.get(pair, 0) + weight
                holders.setdefault(pair, set()).add(index)
                changed.add(pair)
        pair_count.pop((a, b), None)
        changed.discard((a, b))
        for pair in sorted(changed):
            count = pair_count[pair]
            if count > 0:
                heapq.heappush(queue, (-count, raw[pair[0]], raw[pair[1]], *pair))
            else:
                pair_count.pop(pair)
                holders.pop(pair, None)
    return learned
