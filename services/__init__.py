"""Steps shared by several resources and the CLI: each needs a few queries in one
transaction with a little Python between them (hashing, tokens, rendering mail)."""
