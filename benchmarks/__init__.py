"""Benchmarks of rssm: per-iteration cost, scaling, time to accuracy, peer libraries.

Run ``python -m benchmarks`` (``--quick`` for a one-minute smoke run, ``--full`` for the
run committed under ``benchmarks/results/``). Nothing here is collected by pytest.
"""
