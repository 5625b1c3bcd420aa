"""What a trained model is worth and where it goes: scores on prepared corpora, the bigram
baseline, samples, the report of a run and its charts.

It imports every layer below it.
"""
