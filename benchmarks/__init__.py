"""Side-by-side benchmarks of paimon_core against raw pyarrow, pypaimon, delta-rs and DuckDB.

Run a suite with ``python -m benchmarks SUITE [--quick]`` from the repository root (``--list``
names the suites). The layout:

* :mod:`benchmarks.harness`: what every suite shares, on the driver side (step processes,
  interleaved repetitions, CPU pressure, medians, targets, Markdown and JSON) and on the step side
  (timing, peak RSS, profiles, the result line);
* :mod:`benchmarks.data`: the generators and Arrow IPC helpers that several suites share;
* :mod:`benchmarks.suites`: one module per suite: its workload, its steps, its targets, its report;
* :mod:`benchmarks.engines`: one module per engine, each implementing the suites it takes part in;
* :mod:`benchmarks.step`: the entry point of one step process, ``python -m benchmarks.step``.

This package is imported by step processes in every benchmark virtualenv (pyarrow 19 with pypaimon,
the delta-rs one), so this file and every ``__init__`` below it import nothing but the standard library.
"""
