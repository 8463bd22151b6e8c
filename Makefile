# The one entry point for every task a contributor runs; each gate also runs alone.
.PHONY: demo test test-fast lint typecheck template bench lock

demo:       ## set up on first use, then run the dispatcher end to end on an embedded PostgreSQL
	./scripts/demo.sh

test:       ## every gate, what CI runs: lint, format, types, template and build, all tests
	./scripts/test.sh

test-fast:  ## the pure layers' tests (engine, planner): no database, no build
	./scripts/test.sh fast

lint:       ## ruff check and ruff format --check
	./scripts/test.sh lint

typecheck:  ## mypy, strict
	./scripts/test.sh typecheck

template:   ## sam validate, sam validate --lint, cfn-lint, sam build
	./scripts/test.sh template

bench:      ## performance benchmarks (not part of the gate); ARGS="--duties 20000" for a small N
	./scripts/bench.sh $(ARGS)

lock:       ## re-resolve the hashed dependency pins after editing pyproject.toml
	./scripts/lock.sh
