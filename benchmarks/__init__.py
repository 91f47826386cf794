"""The benchmarks (``python -m benchmarks.bench``) and the fault-injection suite
(``python -m benchmarks.chaos``), run from the repository root; :mod:`.common` holds what
both use."""
