"""Rows of the simulator's op table, by family (see table.py)."""
