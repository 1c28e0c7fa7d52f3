# Every target creates the virtual environment first if it is missing.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench proto clean

# Editable in compat mode: the project directory goes on the path as it is, so
# PySpark's lookup of top-level pyspark_* modules finds pyspark_tieredstore (the
# default editable finder maps the package only and hides them).
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]' --config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tieredstore demo

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check tieredstore tests bench
	$(BIN)/lint-imports --no-cache --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadgroup

bench: $(STAMP)
	$(BIN)/python -m bench

proto: $(STAMP)
	for pkg in metadata ledger; do \
		$(BIN)/python -m grpc_tools.protoc -I tieredstore/$$pkg --python_out=tieredstore/$$pkg \
			--pyi_out=tieredstore/$$pkg tieredstore/$$pkg/*.proto || exit 1; \
	done

clean:
	rm -rf $(VENV) demo-data .mypy_cache .ruff_cache .pytest_cache
