"""Text and tokens: documents and where they come from, the pools they are split into, the
tokenizers (characters and byte-level BPE), prepared corpora with content digests, and the
training windows over them.

It imports `zrodlo.storage` and `zrodlo.draws`.
"""
