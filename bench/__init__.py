"""Benchmarks: each module has a ``main()`` that prints its figures and a ratio against a
baseline measured in the same run. ``python -m bench.all`` runs them all."""
