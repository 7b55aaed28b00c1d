"""Device benchmarks and the analyses of their results (see bench/results/
README.md).  A package so that the tests import its logic as `bench.*`;
the scripts run as `PYTHONPATH=. python3 bench/NAME.py`."""
