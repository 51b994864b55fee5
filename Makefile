# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both create the virtual environment and install the project on first use (or when
# pyproject.toml changes); nothing else needs to be installed but Python >= 3.11.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_ARGS ?=

.PHONY: demo test bench lint typecheck check clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "trustroute needs Python >= 3.11; run: make PYTHON=python3.11 ..." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The main job: a simulated workload routed and learned on the embedded store (.trustroute/).
demo: $(STAMP)
	$(BIN)/trustroute demo $(DEMO_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest

# Benchmarks also want the optional sentence embedder (hand-off benchmark) and matplotlib.
# torch 2.13.0 is pinned so pip takes the CPU build instead of several GB of CUDA wheels;
# if the extra cannot be installed, that one benchmark says so and is skipped.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet "torch==2.13.0" -e ".[dev,plot,embeddings]" || \
		echo "optional embeddings extra not installed: the hand-off benchmark will be skipped"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks

# The house style is `ruff check` (pyproject.toml); the code is not ruff-format'ed.
lint: $(STAMP)
	$(BIN)/ruff check __init__.py router profiles integrations tests benchmarks examples

# mypy checks the package as it is installed, trustroute.*: a link named trustroute to
# this folder stands in for the install (mypy cannot follow an editable install's finder).
typecheck: $(STAMP)
	@mkdir -p .mypy_path && ln -sfn "$(CURDIR)" .mypy_path/trustroute
	cd .mypy_path && MYPYPATH="$(CURDIR)/.mypy_path" ../$(BIN)/mypy -p trustroute \
		--config-file ../pyproject.toml

check: lint typecheck test

clean:
	rm -rf $(VENV) .trustroute .pytest_cache .mypy_cache .ruff_cache .mypy_path
