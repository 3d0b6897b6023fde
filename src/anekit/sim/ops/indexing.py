"""Scatter, sliding-window, sequence-reversal, slice-update and non-zero ops."""

from __future__ import annotations
