"""Training windows: where they lie in a corpus, and the order a run reads them in.

A window of --context C holds up to C tokens of one document: the model reads the first C-1 and
is scored on the next token at each of them. Inside a document of L tokens (BOS t1..tn EOS, so
L-1 targets) windows start at 0, C-1, 2(C-1), ... and never cross into the next document, so every
target (each token and the EOS) is scored exactly once and BOS only ever is input. The last
window of a document may hold fewer targets, and its batch pads it (`zrodlo.data.batches`).

Step n reads positions n*B .. n*B+B-1 of an endless stream of passes over the W windows; position
q is window order_p(q mod W) of pass p = q div W, where order_p is the identity, or with shuffling a
keyed bijection of range(W) drawn from (seed, p) alone (`zrodlo.draws.bijection`), evaluated at
just the positions a step reads. So every step has exactly B windows, any step can be computed without the
ones before it (a resumed run needs only its step count), and neither costs memory or time that
grows with W.
"""

from dataclasses import dataclass

import numpy as np

from zrodlo.draws.bijection import bijection
from zrodlo.draws.chacha import Purpose, Stream
from zrodlo.storage.refusal import Refusal


def check_context(context: int) -> None:
    """Refuse a context too short to hold one token read and one predicted."""
    if context < 2:
        raise Refusal(
            f"--context {context} leaves no token to read before the one predicted; "
            "it needs two or more"
        )


@dataclass(frozen=True)
class WindowTable:
    """Every window of a corpus at one context, in corpus order, held per document: memory grows
    with the documents, not with the windows, and `locate` finds any windows' places.

    first_window (D+1,) int64: the index of each document's first window; the last entry is W.
    doc_starts (D,) int64: flat token position of each document's BOS.
    doc_targets (D,) int64: how many targets each document holds.
    """

    first_window: np.ndarray
    doc_starts: np.ndarray
    doc_targets: np.ndarray
    context: int

    def __len__(self) -> int:
        return int(self.first_window[-1])

    def locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, target_counts) of windows `indices`, each (B,) int64: the flat token position
        of each window's first input token, and how many targets it scores (1 .. context-1)."""
        indices = np.asarray(indices, dtype=np.int64)
        # A document without windows has first_window[d] == first_window[d+1], so searching to
        # the right passes over it to the document the window belongs to.
        doc = np.searchsorted(self.first_window, indices, side="right") - 1  # (B,)
        k = indices - self.first_window[doc]  # (B,) the window's place inside its document
        span = self.context - 1  # targets per full window
        starts = self.doc_starts[doc] + k * span  # (B,)
        return starts, np.minimum(span, self.doc_targets[doc] - k * span)

    def targets_of(self, indices: np.ndarray) -> int:
        """How many targets the windows `indices` score together."""
        return int(self.locate(indices)[1].sum())


def build_windows(offsets: np.ndarray, context: int) -> WindowTable:
    """The windows of the documents tokens[offsets[d]:offsets[d+1]] at --context `context`.

    offsets (D+1,) are the documents' boundaries. A corpus whose total token count
    offsets[-1] - offsets[0] is below `context` (an empty one included) is refused: it cannot
    fill even one window. A document of fewer than two tokens has no target and no window.
    """
    check_context(context)
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.ndim != 1:
        raise ValueError(f"document offsets have shape {offsets.shape}, not (documents+1,)")
    total = int(offsets[-1] - offsets[0]) if offsets.size else 0
    if total < context:
        raise Refusal(
            f"the corpus holds {total} tokens, fewer than one window of --context {context}"
        )
    lengths = np.diff(offsets)  # (D,)
    if (lengths < 0).any():
        raise ValueError("document offsets decrease")
    doc_targets = np.maximum(lengths - 1, 0)  # (D,)
    per_doc = -(
        -doc_targets // (context - 1)
    )  # (D,) windows in each document: ceil(targets / span)
    first_window = np.zeros(len(per_doc) + 1, dtype=np.int64)  # (D+1,)
    np.cumsum(per_doc, out=first_window[1:])
    if first_window[-1] == 0:
        raise ValueError("no document holds a target: each needs BOS and at least an EOS")
    return WindowTable(first_window, offsets[:-1], doc_targets, context)


def pass_stream(seed: int, pass_index: int) -> Stream:
    """The stream whose keyed bijection orders pass `pass_index` of a shuffled run."""
    return Stream(seed, Purpose.WINDOW_ORDER, a=pass_index)


def scored_windows(count: int, size: int | None, seed: int) -> np.ndarray:
    """The (k,) int64 windows, in corpus order, that a score of `size` of a corpus's `count`
    windows reads: the first `size` places of the keyed bijection of range(count) drawn from
    `seed`, so a uniform draw without replacement that is the same at every scoring and on every
    machine; every window where `size` is None or not below `count`."""
    if size is None or size >= count:
        return np.arange(count, dtype=np.int64)
    chosen = bijection(Stream(seed, Purpose.SCORED_WINDOWS), count, np.arange(size))
    return np.sort(chosen)


class WindowStream:
    """The window indices each step reads: B consecutive positions of the pass stream."""

    def __init__(self, count: int, batch_size: int, seed: int, shuffle: bool) -> None:
        if count < 1 or batch_size < 1:
            raise ValueError(f"{count} windows in batches of {batch_size}")
        self.count = count
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle

    def indices(self, step: int) -> np.ndarray:
        """The (B,) int64 window indices of 0-based step `step`, in the order they are batched."""
        if step < 0:
            raise ValueError(f"step {step} is negative")
        position = step * self.batch_size + np.arange(self.batch_size, dtype=np.int64)  # (B,)
        passes = position // self.count  # (B,)
        within = position % self.count  # (B,)
        if not self.shuffle:
            return within
        out = np.empty(self.batch_size, dtype=np.int64)  # (B,)
        for p in np.unique(passes).tolist():  # one or two passes, not one iteration per window
            here = passes == p
            out[here] = bijection(pass_stream(self.seed, p), self.count, within[here])
        return out
