# A shim for tools that run `python setup.py ...`: the metadata, version
# included, lives in pyproject.toml (setuptools reads it from there).
from setuptools import setup

setup()
