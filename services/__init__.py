"""Steps shared by several resources and the CLI: each needs a few queries in one
transaction with a little Python between them (hashing, tokens, rendering mail).

The modules fall in the parts of architecture.SERVICE_PARTS, and
SERVICE_IMPORTS_REFUSED there says which part may not import which
(docs/architecture.md; tests/test_layers.py holds every import to both).
"""
