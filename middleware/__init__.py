"""Request pipeline: request ids, token auth, access rules, and validation of bodies."""
