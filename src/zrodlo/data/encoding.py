"""A documents file read, checked and encoded in batches, in a child process where the system
forks cheaply, so that parsing JSON (which holds Python's GIL) runs on one core while the caller
writes and hashes the batches on another.

The tokens travel through memory the two processes share: a ring of a few slots, each about
twice a batch, that the child encodes straight into in turn and the caller hands back once it is
done with a batch (a batch too large for a slot goes down the pipe instead). The ids and sizes go down a
pipe. The child waits for a free slot, so it runs at most a ring ahead of the caller, and memory
stays bounded by the batch size. A refusal in the child (a bad line, a repeated id, a text the
tokenizer would not give back) reaches the caller as the same refusal, raised when the caller
reaches the batch it stopped at. Where forking is not safe (macOS, Windows) the batches are
encoded in the caller's process, to the same bytes.
"""

from __future__ import annotations

import json
import mmap
import multiprocessing
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Semaphore
from pathlib import Path

import numpy as np

from zrodlo.data.documents import Document, batched, read_documents
from zrodlo.data.tokenizer import Tokenizer
from zrodlo.storage.refusal import Refusal

# Forking is cheap and safe on Linux; on macOS a forked child of a process holding system
# frameworks (as PyTorch does) may crash, and Windows has no fork.
APART = sys.platform.startswith("linux")


SLOTS = 3  # one being filled, one being written and hashed, one spare


@dataclass(frozen=True)
class Batch:
    """Documents encoded one after another: ids (k,), tokens (sum of sizes,) of the corpus's
    token type, each document BOS t1..tn EOS, sizes (k,) int64, n+2 each, and the characters of
    their texts (the tokens of a subword tokenizer are fewer).

    `done` must be called once the tokens are no longer needed: they may lie in a shared slot
    that the child fills again after it."""

    ids: list[str]
    tokens: np.ndarray
    sizes: np.ndarray
    characters: int
    done: Callable[[], None] = lambda: None


def encoded_batches(
    documents: Path, tokenizer: Tokenizer, dtype: np.dtype, characters: int
) -> Iterator[Batch]:
    """The documents of a file in batches of about `characters` characters, checked line by
    line as `read_documents` checks them and encoded with `tokenizer` into `dtype` tokens, in
    order; each batch's `done` is to be called in order too.

    The child starts here, before the caller starts threads of its own (a fork copies only the
    thread that calls it, so it is safest before there are others)."""
    if not APART:
        return _encode(documents, tokenizer, dtype, characters)
    context = multiprocessing.get_context("fork")
    slot_size = 2 * characters * dtype.itemsize
    ring = mmap.mmap(-1, SLOTS * slot_size)  # shared with the child across the fork
    free = context.Semaphore(SLOTS)
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(
        target=_encode_into,
        args=(sending, ring, free, documents, tokenizer, dtype, characters),
        name="zrodlo-encode",
        daemon=True,  # never outlives the command
    )
    child.start()
    sending.close()  # the child's end: a child that dies closes the pipe, and recv says so
    return _receive(receiving, child, ring, free, documents, dtype)


def _receive(
    receiving: Connection,
    child: BaseProcess,
    ring: mmap.mmap,
    free: Semaphore,
    documents: Path,
    dtype: np.dtype,
) -> Iterator[Batch]:
    slot_size = len(ring) // SLOTS
    try:
        while (message := _received(receiving, documents)) is not None:
            ids, sizes, slot, count, characters = message
            if slot is None:
                tokens = np.frombuffer(receiving.recv_bytes(), dtype=dtype)
            else:
                tokens = np.frombuffer(ring, dtype=dtype, count=count, offset=slot * slot_size)
            yield Batch(ids, tokens, sizes, characters, free.release)
    finally:
        receiving.close()
        child.terminate()  # a caller that stops early leaves no child behind
        child.join()


def _received(receiving: Connection, documents: Path) -> tuple | None:
    try:
        message = receiving.recv()
    except EOFError:
        raise RuntimeError(f"the process encoding {documents} ended without a word") from None
    if isinstance(message, _Failed):
        if message.refusal is not None:
            raise Refusal(message.refusal)
        raise RuntimeError(f"the process encoding {documents} failed:\n{message.traceback}")
    return message


@dataclass(frozen=True)
class _Failed:
    refusal: str | None  # the sentence of a refusal, or None for an error of another kind
    traceback: str


def _texts(documents: Path, batch: list[Document], tokenizer: Tokenizer) -> list[str]:
    """The texts of a batch, refused at the first that would not decode back as written once the
    tokenizer encoded it (a text not in the normal form the tokenizer puts each text in)."""
    for document in batch:
        problem = tokenizer.text_problem(document.text)
        if problem is not None:
            shown = json.dumps(document.id, ensure_ascii=False)
            raise Refusal(f"{documents} line {document.line} (id {shown}) has a text {problem}")
    return [document.text for document in batch]


def _encode(
    documents: Path, tokenizer: Tokenizer, dtype: np.dtype, characters: int
) -> Iterator[Batch]:
    for batch in batched(read_documents(documents), characters):
        texts = _texts(documents, batch, tokenizer)
        tokens, sizes = tokenizer.encode_documents(texts, dtype)
        yield Batch([document.id for document in batch], tokens, sizes, sum(map(len, texts)))


def _encode_into(
    sending: Connection,
    ring: mmap.mmap,
    free: Semaphore,
    documents: Path,
    tokenizer: Tokenizer,
    dtype: np.dtype,
    characters: int,
) -> None:
    """The child: for each batch (ids, sizes, slot, token count, characters), its tokens in that
    slot of the ring or, with slot None, as bytes down the pipe after it; None at the end."""
    slot_size, turn = len(ring) // SLOTS, 0
    try:
        for batch in batched(read_documents(documents), characters):
            free.acquire()  # the caller is done with the batch this slot held
            room = np.frombuffer(
                ring, dtype=dtype, count=slot_size // dtype.itemsize, offset=turn * slot_size
            )
            # Encoded straight into the slot where the batch fits, with no array of its own.
            texts = _texts(documents, batch, tokenizer)
            tokens, sizes = tokenizer.encode_documents(texts, dtype, out=room)
            ids, characters = [document.id for document in batch], sum(map(len, texts))
            if len(tokens) > len(room):  # too large for a slot: down the pipe
                sending.send((ids, sizes, None, len(tokens), characters))
                sending.send_bytes(tokens.data)
            else:
                sending.send((ids, sizes, turn, len(tokens), characters))
                turn = (turn + 1) % SLOTS
        sending.send(None)
    except Refusal as refusal:
        sending.send(_Failed(refusal.sentence, ""))
    except BrokenPipeError:  # the caller stopped reading; nothing to tell
        pass
    except BaseException:
        sending.send(_Failed(None, traceback.format_exc()))
    finally:
        sending.close()
