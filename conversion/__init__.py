"""Checkpoint converters (authors' checkpoints, GPT-2, Llama, BERT) and their CLI."""
