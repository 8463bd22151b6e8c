# The one entry point for every task a contributor runs; each gate also runs alone.
.PHONY: help demo stop-db test test-fast lint typecheck template bench bench-10m bench-history bench-catch-up bench-large-backfill bench-cold-start bench-migration bench-shard-migration bench-account-migration bench-pair lock ca-bundle fuzz soak build deploy local-invoke build-DispatchFunction build-MigrationFunction build-DependenciesLayer

help:       ## list the targets
	@grep -E '^[a-z][a-z0-9-]*:.*## ' $(firstword $(MAKEFILE_LIST)) | sed -E 's/:[^#]*## /\t/' | expand -t 22

demo:       ## set up on first use, then run the dispatcher end to end on an embedded PostgreSQL
	./scripts/demo.sh

stop-db:    ## stop the embedded PostgreSQL that `make demo` and the local commands leave running
	@if [ -x .venv/bin/python ]; then .venv/bin/python -m dispatch_fn stop-db; \
	else echo "nothing to stop: no .venv yet"; fi

test:       ## every gate, what CI runs: lint, format, types, template and build, all tests
	./scripts/test.sh

test-fast:  ## the tests of every folder whose conftest.py says NEEDS_DATABASE = False: no database, no build
	./scripts/test.sh fast

lint:       ## ruff check and ruff format --check
	./scripts/test.sh lint

typecheck:  ## mypy, strict
	./scripts/test.sh typecheck

template:   ## sam validate, sam validate --lint, cfn-lint, sam build
	./scripts/test.sh template

bench:      ## the engine and the dispatcher against PostgreSQL's floor, every mix and layout side by side (not a gate); ARGS="--duties 20000" for a small N
	./scripts/bench.sh $(ARGS)

bench-10m:  ## the first run, the no-op and the week at 10,000,000 duties, as chains of 900 s invocations, beside 1,000,000 (disk checked first)
	./scripts/bench.sh scale --duties 10000000 $(ARGS)

bench-history:         ## a day's run with 34x the task history against the same day without it, at 200,000 duties
	./scripts/bench.sh history $(ARGS)

bench-catch-up:        ## catching up missed days beside a daily run; ARGS as for bench.catch_up
	./scripts/bench.sh catch-up $(ARGS)

bench-large-backfill:  ## the largest backfill the window cap allows, in bounded pages
	./scripts/bench.sh large-backfill $(ARGS)

bench-cold-start:      ## the Lambda artifact's size and its import CPU
	./scripts/bench.sh cold-start $(ARGS)

bench-migration:       ## migrations 0003 and 0006 on a table of existing tasks
	./scripts/bench.sh migration $(ARGS)

bench-shard-migration: ## migration 0011 (the shard keys) on 1,000,000 tasks, inserts going on
	./scripts/bench.sh shard-migration $(ARGS)

bench-account-migration: ## migrations 0012 to 0019 (each duty's account) on 1,000,000 duties, edits going on
	./scripts/bench.sh account-migration $(ARGS)

bench-pair:            ## this checkout's no-op against another checkout's, alternated: ARGS="--against DIR"
	./scripts/bench.sh pair $(ARGS)

lock:       ## re-resolve the hashed dependency pins after editing pyproject.toml
	./scripts/lock.sh

ca-bundle:  ## download Amazon's RDS CA bundle into the artifact's source (before the first deploy)
	./scripts/fetch-rds-ca.sh

fuzz:   ## the handler fuzz test at soak size: 10,000 hostile events on a real PostgreSQL
	./scripts/fuzz.sh

soak:   ## the concurrency soak (8 processes, 50,000 duties, slow plans kept), 30 SIGKILLs, the owed-periods state machine
	./scripts/soak.sh

build:      ## sam build with the pinned SAM CLI and the Python 3.12 the set-up found; refuses without the RDS CA bundle
	./scripts/sam.sh build $(ARGS)

deploy:     ## build, then sam deploy (--guided on a terminal while samconfig.toml holds placeholders; CI passes them in ARGS); CONFIG_ENV=prod, DRY_RUN=1
	./scripts/sam.sh deploy $(ARGS)

local-invoke: ## sam local invoke DispatchFunction in Docker: EVENT=events/backfill-13-months.json, DATABASE_URL in ENV_VARS=events/env/local-postgres.json
	./scripts/sam.sh local-invoke $(or $(EVENT),events/backfill-13-months.json) $(ARGS)

# `sam build` (template.yaml, BuildMethod makefile) runs these in a copy of src/.
_here := $(dir $(abspath $(firstword $(MAKEFILE_LIST))))
build-DispatchFunction build-MigrationFunction:
	$(_here)scripts/build_lambda.sh function "$(ARTIFACTS_DIR)"
build-DependenciesLayer:
	$(_here)scripts/build_lambda.sh layer "$(ARTIFACTS_DIR)"
