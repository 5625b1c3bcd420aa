"""Runs: the plan of hyperparameters, the schedule, AdamW, the loss, one update, the loop of
updates, held-out scores, checkpoints, the run directory and its records, and the processes of a
data-parallel run.

It imports every layer below it: storage, draws, data and model.
"""
