"""Examples built on the installed package's APIs; not installed with it."""
