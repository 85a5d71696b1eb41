# Quickstart targets. `make demo` and `make test` each set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU wheel for fast local setup; GPU users override, e.g. `make setup TORCH_SPEC='torch>=2.4'`.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test test-slow test-all clean reproduce

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

demo: setup
	$(BIN)/python -m modeling_simplified.demo

# The paper's block comparison in miniature (docs/reproduction/); extra options via REPRODUCE_ARGS, e.g. "--seeds 0 1 2".
reproduce: setup
	$(BIN)/python -m modeling_simplified.training.reproduce $(REPRODUCE_ARGS)

test: setup
	$(BIN)/pytest -q

test-slow: setup
	$(BIN)/pytest -q -m slow

test-all: setup
	$(BIN)/pytest -q -m "slow or not slow"

clean:
	rm -rf $(VENV) *.egg-info
