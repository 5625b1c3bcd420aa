"""Files as Zrodlo reads and writes them: the refusal a user reads, JSON parsed with limits,
content digests, safetensors files hashed as they are written and read, files read back from
a listing of their sha256, and outputs that appear whole or not at all.

The lowest layer: it imports nothing else of Zrodlo.
"""
