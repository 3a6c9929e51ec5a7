"""Helpers the tests import; tests/conftest.py keeps the fixtures."""

import pathlib

# The checkout: tests/support/__init__.py is three levels down.
ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
# The npm tools of the contract tests (package.json and package-lock.json pin them;
# scripts/bootstrap installs them into node_modules/).
CONTRACT_TOOLS = ROOT / 'tests' / 'contract_tools'
