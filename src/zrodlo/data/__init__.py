"""Text and tokens: documents and where they come from, the pools they are split into, the
character tokenizer, prepared corpora with content digests, and the training windows over them.

It imports `zrodlo.storage` and `zrodlo.draws`.
"""
