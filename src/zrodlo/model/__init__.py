"""The network: its configuration, the decoder families (each one module, and their registry), the
parts and layers a decoder is built from, its seeded initial weights, dropout masks, the number
formats and devices it computes on, and the model directory on disk.

It imports `zrodlo.storage`, `zrodlo.draws` and `zrodlo.data`.
"""
