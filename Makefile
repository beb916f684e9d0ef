# Vectide developer entry points. `make run` and `make test` work on a fresh Debian machine.
BIN := .venv/bin
PYTEST_ARGS ?=

.PHONY: setup run down status test test-unit test-integration test-heavy lint clean

setup:
	@bash scripts/setup.sh

## Set up, start the local deployment in the background and print its status.
run: setup
	$(BIN)/vectide infra up

## Stop everything `make run` started.
down:
	@if [ -x $(BIN)/vectide ]; then $(BIN)/vectide infra down; fi

status:
	$(BIN)/vectide infra status

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
