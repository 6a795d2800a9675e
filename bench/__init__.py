"""attnkit's benchmarks: speed against peer toolkits, translation quality, profiles.

Run the scripts as modules from the repository root, e.g. ``python -m bench.speed --quick``
(with attnkit importable: installed, or ``PYTHONPATH=src``). The peers live in :mod:`bench.peers`.
"""
