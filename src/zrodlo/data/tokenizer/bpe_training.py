"""Fitting a byte-level BPE, deterministic to the byte: the same training documents give the same
merges on every machine, at any thread count and hash seed.

Texts are split into pieces by GPT-2's pre-tokenizer (`PIECES`), each piece taken as its UTF-8
bytes; the pieces are counted, and the pair of neighbouring symbols that occurs most often across
them is merged into a new symbol, until the vocabulary has its size. A tie between equally frequent
pairs goes to the pair whose bytes come first: the left symbol's bytes compared first, then the
right's, as byte strings. Nothing depends on the order of a hash table: pieces are kept in the order
they were first seen, and the choice of a pair depends on counts and bytes alone.

Cost: each merge visits only the places where its pair occurs (`bpe_pairs.PairPlaces` keeps
the distinct pieces as linked symbols and every pair's places), so fitting costs what the text it
touches costs, with no piece rewritten whole. Memory is bounded by a multiple of the distinct
pieces' bytes: 16 bytes a byte for the symbols and their links, at most 14 for the places (three a
byte), at most some 560 for each pair present (its count, its places and up to two queue entries:
stale entries are dropped by rebuilding the queue once they outnumber the live ones), pairs never
outnumbering bytes, and some 60 a byte for the arrays a merge passes through: at most about 650
bytes per byte, and 60 to 200 on the documents benchmarks/bpe_fit.py fits.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from tokenizers import pre_tokenizers

from zrodlo.data.tokenizer.bpe_pairs import PairPlaces

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
    """The merges learned from the piece counts (each positive) until they have made
    `symbols_wanted` new symbols, each a pair of symbols (strings of byte stand-ins) in the order
    learned; fewer where no pair is left to merge. Two merges may spell the same bytes ("ab" "c"
    and "a" "bc"): they make one symbol, which both then stand for."""
    stand_in = byte_symbols()
    symbols: list[str] = list(stand_in)  # symbol id -> its text
    raw: list[bytes] = [bytes([byte]) for byte in range(256)]  # symbol id -> its bytes
    id_of = {symbol: index for index, symbol in enumerate(symbols)}
    # The stand-ins back to their bytes, all pieces at once.
    to_bytes = str.maketrans({symbol: chr(byte) for byte, symbol in enumerate(stand_in)})
    joined = "".join(counts).translate(to_bytes).encode("latin-1")
    lengths = [len(piece) for piece in counts]
    width = 257 + min(symbols_wanted, len(joined))  # no merge makes more symbols than bytes
    pairs = PairPlaces(joined, lengths, list(counts.values()), width)
    del joined
    # Best first: the largest count, then the left symbol's bytes, then the right's. An entry
    # whose count is no longer its pair's is stale and skipped. Pairs met once wait outside the
    # queue while any pair is met twice or more: none of them can come first before then.
    least = 2

    def queued() -> list[tuple[int, bytes, bytes, int]]:
        count = pairs.count.items()
        entries = [(-n, raw[k // width], raw[k % width], k) for k, n in count if n >= least]
        heapq.heapify(entries)
        return entries

    queue = queued()
    learned: list[tuple[str, str]] = []
    while len(symbols) - 256 < symbols_wanted:
        if not queue:
            if least == 1 or not pairs.count:
                break
            least = 1
            queue = queued()
            continue
        negative, _, _, key = heapq.heappop(queue)
        if pairs.count.get(key) != -negative:
            continue
        a, b = divmod(key, width)
        learned.append((symbols[a], symbols[b]))
        text = symbols[a] + symbols[b]
        if text not in id_of:
            id_of[text] = len(symbols)
            symbols.append(text)
            raw.append(raw[a] + raw[b])
        for pair, count in pairs.merge(a, b, id_of[text]):
            if count >= least:
                heapq.heappush(queue, (-count, raw[pair // width], raw[pair % width], pair))
        if len(queue) > 2 * len(pairs.count) + 1024:  # stale entries outnumber live ones
            queue = queued()
    return learned
