# The one entry point for every task a contributor runs.
.PHONY: demo stop-db test bench build

demo:   ## set up on first use, then run the dispatcher end to end on an embedded PostgreSQL
	./scripts/demo.sh

stop-db: ## stop the embedded PostgreSQL that `make demo` and the local commands leave running
	@if [ -x .venv/bin/python ]; then .venv/bin/python -m dispatch_fn stop-db; \
	else echo "nothing to stop: no .venv yet"; fi

test:   ## set up on first use, then every gate: lint, format, types, template, build, tests
	./scripts/test.sh

bench:  ## performance benchmarks (not part of the gate's timing)
	./scripts/bench.sh
