"""Training recipes, data, callbacks and the CLI (never imported by the Hub-shipped modules)."""
