"""One beat's hot path, profiled in-process: ``python -m benchmarks.profile_beat`` (see
``__main__`` for what it measures and how)."""
