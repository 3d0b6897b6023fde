"""Producers of MIL programs other than the tracer: packages on disk (and, with
the ``torch`` extra, PyTorch models)."""
