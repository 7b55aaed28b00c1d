"""The cost model and the order checked against recorded times; candidate
source hashes."""
