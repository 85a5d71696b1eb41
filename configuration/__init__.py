"""The training presets: one JSON per recipe family (`<family>.json`), read by `modeling_simplified.training.presets`.
A package so that it installs as `modeling_simplified.configuration` (pyproject package-dir), data files and all."""
