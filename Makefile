# The two commands of the README. Both create .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install only when the project's metadata changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# PyTorch (for the measuring harness and its tests): the CPU build, pinned so that pip takes the
# wheel this kind of machine keeps on disk instead of downloading a multi-GB CUDA build.
TORCH ?= torch==2.13.0

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e '.[test,measure,web]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/botec estimate

# ruff first (its rules: pyproject.toml's [tool.ruff]): a defect it finds fails before the long suite.
test: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
