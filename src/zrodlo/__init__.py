"""Zrodlo: reproducible, resumable training of small character-level language models."""

__version__ = "0.1.0"
