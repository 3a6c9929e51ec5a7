"""Helpers the tests import; tests/conftest.py keeps the fixtures."""

import pathlib

# The checkout: tests/support/__init__.py is three levels down.
ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
