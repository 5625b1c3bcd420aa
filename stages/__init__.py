"""The `zrodlo` command line: one module per pipeline stage, each a thin layer over the library."""
