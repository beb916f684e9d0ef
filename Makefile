# Vectide developer entry points. `make run` and `make test` work on a fresh Debian machine.
BIN := .venv/bin
PYTEST_ARGS ?=

.PHONY: setup run down status test test-unit test-integration test-heavy lint clean

setup:
	@bash scripts/setup.sh

MODE ?= standalone

## Set up, start infra + Vectide in the background (MODE=cluster for one process per role),
## then run the pymilvus demo against it.
run: setup
	$(BIN)/vectide up --mode $(MODE)
	$(BIN)/python scripts/demo.py

## Stop everything `make run` started.
down:
	@if [ -x $(BIN)/vectide ]; then $(BIN)/vectide down; fi

status:
	$(BIN)/vectide status

## Set up and run lint plus the whole test suite (the tests start their own infrastructure).
test: setup lint
	$(BIN)/pytest $(PYTEST_ARGS)

test-unit: setup
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

test-integration: setup
	$(BIN)/pytest tests/integration -m "not heavy" $(PYTEST_ARGS)

test-heavy: setup
	$(BIN)/pytest -m heavy $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

clean: down
	rm -rf .vectide
