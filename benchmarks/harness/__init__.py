"""Shared benchmark infrastructure.

* :mod:`.system`: memory (RSS, peak RSS, MemAvailable), load, allocator, provenance;
* :mod:`.metering`: a run's executor (per-party CPU / wall seconds) and channel (bytes per
  sender / receiver from the transcript);
* :mod:`.timing`: best-of-N timings of plain calls;
* :mod:`.results`: atomic JSON / text writes, lock files, resumable partial files, figures;
* :mod:`.notes`: Markdown notes and templates (``benchmarks/notes``) and data files
  (``benchmarks/data``);
* :mod:`.fedstruct_paper`: the FedStruct paper's numbers per cell (the FedStruct
  reproduction and the baselines).

Benchmark scripts run as ``python -m benchmarks.<script>`` and import this package as
``benchmarks.harness``; a helper that two scripts import lives here.
"""
