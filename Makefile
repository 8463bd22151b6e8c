# The one entry point for every task a contributor runs.
.PHONY: demo test bench build

demo:   ## set up on first use, then run the dispatcher end to end on an embedded PostgreSQL
	./scripts/demo.sh

test:   ## set up on first use, then every gate: lint, format, types, template, build, tests
	./scripts/test.sh

bench:  ## performance benchmarks (not part of the gate's timing)
	./scripts/bench.sh
