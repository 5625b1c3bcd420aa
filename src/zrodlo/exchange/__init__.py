"""Models in Hugging Face transformers' files, both ways: export writes a model directory or
checkpoint as a directory transformers loads, import reads one into a Zrodlo model directory.
What is a family's own (its configuration in transformers' terms, the names of its parameters)
its module in `zrodlo.model.families` states; this package moves the files.

It imports every layer below it.
"""
