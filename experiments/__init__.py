"""Experiments built on the training API (`modeling_simplified.training.api`); not installed with the package."""
