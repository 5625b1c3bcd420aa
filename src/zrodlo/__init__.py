"""Zrodlo: reproducible, resumable training of small language models."""

__version__ = "0.1.0"
