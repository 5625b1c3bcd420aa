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

A corpus with target weights (chat documents, `zrodlo.data.chat_encoding`) scores only the targets
of weight 1, and its windows are those that hold one: a window of questions alone teaches nothing,
and a step of such windows would have no loss. Those windows are listed (8 bytes each), so a
weighted corpus's table grows with its windows.
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
    # A weighted corpus's (N,) uint8 target weights, and the (W,) int64 windows of the documents'
    # that hold a target of weight 1, which are then the table's windows.
    weights: np.ndarray | None = None
    chosen: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.first_window[-1]) if self.chosen is None else len(self.chosen)

    def locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, target_counts) of windows `indices`, each (B,) int64: the flat token position
        of each window's first input token, and how many targets it holds (1 .. context-1)."""
        indices = np.asarray(indices, dtype=np.int64)
        if self.chosen is not None:
            indices = self.chosen[indices]
        # A document without windows has first_window[d] == first_window[d+1], so searching to
        # the right passes over it to the document the window belongs to.
        doc = np.searchsorted(self.first_window, indices, side="right") - 1  # (B,)
        k = indices - self.first_window[doc]  # (B,) the window's place inside its document
        span = self.context - 1  # targets per full window
        starts = self.doc_starts[doc] + k * span  # (B,)
        return starts, np.minimum(span, self.doc_targets[doc] - k * span)

    def targets_of(self, indices: np.ndarray) -> int:
        """How many targets the windows `indices` score together (of weight 1, where weighted)."""
        starts, counts = self.locate(indices)
        if self.weights is None:
            return int(counts.sum())
        span = np.arange(1, self.context, dtype=np.int64)  # (C-1,) target offsets in a window
        held = span[None, :] <= counts[:, None]  # (B, C-1)
        positions = np.where(held, starts[:, None] + span[None, :], 0)  # (B, C-1)
        return int((self.weights[positions] * held).sum())


def build_windows(
    offsets: np.ndarray, context: int, weights: np.ndarray | None = None
) -> WindowTable:
    """The windows of the documents tokens[offsets[d]:offsets[d+1]] at --context `context`; with
    `weights` (N,) uint8, the windows that hold a target of weight 1.

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
    table = WindowTable(first_window, offsets[:-1], doc_targets, context)
    if weights is None:
        return table
    starts, _ = table.locate(np.arange(len(table), dtype=np.int64))  # (W,)
    # A window's targets run from its start + 1 to the next window's start + 1; the last window of
    # a document runs on over the next document's first token, whose weight is always 0.
    held = np.add.reduceat(weights, starts + 1, dtype=np.int64)  # (W,)
    chosen = np.flatnonzero(held > 0).astype(np.int64)  # (W',)
    if len(chosen) == 0:
        raise Refusal("the corpus holds no target of weight 1, so there is nothing to train on")
    return WindowTable(first_window, offsets[:-1], doc_targets, context, weights, chosen)


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
