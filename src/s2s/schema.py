"""What the typed records of params and artifacts declare beside their types: ranges.

A dataclass field takes ``field(metadata=rng(lo, hi))``; the decoder (:mod:`s2s.config`) checks it
and names the key path when a value falls outside. This module imports nothing of the package, so
that a model's config (``s2s.arch``) and the params schema share it without importing each other.
"""

from __future__ import annotations

__all__ = ["rng"]


def rng(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> dict:
    """Field metadata: the value must be >= lo (> lo with ``lo_open``) and <= hi; None: no bound."""
    return {"min": lo, "max": hi, "lo_open": lo_open}
