"""Hub export: model cards, the flat custom-code folder, and the push CLI."""
