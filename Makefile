# The one entry point for every task a contributor runs.
.PHONY: demo test bench build fuzz build-DispatchFunction build-MigrationFunction

demo:   ## set up on first use, then run the dispatcher end to end on an embedded PostgreSQL
	./scripts/demo.sh

test:   ## set up on first use, then every gate: lint, format, types, template, build, tests
	./scripts/test.sh

bench:  ## performance benchmarks (not part of the gate's timing)
	./scripts/bench.sh

fuzz:   ## the handler fuzz test at soak size: 10,000 hostile events on a real PostgreSQL
	bash -c 'source scripts/env.sh && ensure_venv && DULY_SOAK=1 .venv/bin/pytest tests/handler/test_handler_fuzz.py -q -p no:logging --hypothesis-show-statistics'

# `sam build` (template.yaml, BuildMethod makefile) runs this in a copy of src/.
_here := $(dir $(abspath $(firstword $(MAKEFILE_LIST))))
build-DispatchFunction build-MigrationFunction:
	$(_here)scripts/build_lambda.sh "$(ARTIFACTS_DIR)"
