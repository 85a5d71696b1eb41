"""Training recipes, data, callbacks, the training API (`api.train`) and its CLI (never imported by the Hub-shipped
modules)."""
