"""The network: its configuration, its layers, its seeded initial weights, dropout masks, the
number formats and devices it computes on, and the model directory on disk.

It imports `zrodlo.storage`, `zrodlo.draws` and `zrodlo.data`.
"""
