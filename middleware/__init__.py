"""Request pipeline: request ids, token auth, access rules, body parsing and validation."""
