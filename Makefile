# Headway — the two commands of the Quick start are `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
# loadgroup: tests marked xdist_group(NAME) run on one worker (a shared test cluster's), the rest
# are spread test by test as with --dist load.
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: install migrate demo serve test test-fast test-e2e lint format bench gpu-check compose-check clean

# torch is pinned here: 2.13.0 is the CPU build on this disk; a looser pin pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml Makefile tests/oidc/package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	# DS_BUILD_OPS=0: DeepSpeed installs without compiling its CUDA/C++ ops (docs/deepspeed.md).
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e '.[server,dev,deepspeed,ray]'
	# The single sign-on tests' OpenID Connect provider (oidc-provider from npm, pinned by its
	# lock file). Where Node.js or the npm registry is missing, those tests skip (fail under
	# CI=true) and the rest of the install goes on.
	if command -v npm >/dev/null; then npm ci --prefix tests/oidc --no-audit --no-fund --silent \
	  || echo "npm ci --prefix tests/oidc failed: the single sign-on tests need it" >&2; fi
	touch $(STAMP)

install: $(STAMP)

# collectstatic: hashed + gzipped static files for WhiteNoise (docs/dashboard.md).
migrate: install
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py collectstatic --noinput -v 0

## make demo [ONCE=1]: serve on the embedded defaults and train examples/digits.
demo: migrate
	$(PY) manage.py demo $(if $(ONCE),--once)

## make serve: web server (gunicorn, config/gunicorn.py) + one worker in the foreground (HEADWAY_PORT honoured).
serve: migrate
	$(PY) manage.py serve

## make test: the whole suite, tests/ and e2e_tests/ (unit, integration with real services, browser).
## It ends with its 30 slowest tests, where the suite's time goes.
test: install
	$(PY) -m pytest $(PYTEST_ARGS) --durations=30 $(ARGS)

## make test-fast: the unit tests only (no slow, integration or browser tests), wherever they live:
## a few e2e_tests/ modules hold a unit test beside their full-stack ones.
test-fast: install
	$(PY) -m pytest $(PYTEST_ARGS) -m "not slow and not integration and not browser" $(ARGS)

## make test-e2e: the full-stack tests only (e2e_tests/: live server, real worker, real training).
test-e2e: install
	$(PY) -m pytest $(PYTEST_ARGS) e2e_tests $(ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	# django-stubs imports the settings; a deployment's DATABASE_URL (CI: PostgreSQL) requires a key.
	SECRET_KEY=$${SECRET_KEY:-mypy-only-not-a-secret} $(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The bench extra (the full mlflow, for the MLflow tracking server peer) only here: `make install`
# stays what the tests need.
$(BENCH_STAMP): $(STAMP)
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e '.[server,dev,deepspeed,ray,bench]'
	touch $(BENCH_STAMP)

## make bench [TINY=1]: every benchmark of bench/run_all.py (harness_overhead, metrics_ingest, sdk_reporting,
## logging_overhead, tensorboard_writer, metrics_read, hparam_importance, run_filter, dashboard, preempt_latency, scheduling, scheduling_scale, ddp_overhead,
## serving, overload, checkpoint_io) to its JSON line on SQLite, then on PostgreSQL + Redis (moto S3 in
## checkpoint_io); cleans up after itself.
bench: migrate $(BENCH_STAMP)
	$(PY) bench/run_all.py $(if $(TINY),--tiny)

## make gpu-check: on a machine with a CUDA device, every GPU path in one run of at most 8 minutes
## (bench/gpu_check.py: CUDA tests, a 1-GPU cluster trial, use_amp, DeepSpeed, NVML, the harness
## bench on cuda, Lightning, Hugging Face, the DCGAN port) to var/gpu-check.json; exits 2 without one.
# No `install` prerequisite: a GPU machine often has no network, and a Makefile newer than the
# stamp would start a pip install there. It runs the .venv as it is.
gpu-check:
	$(PY) bench/gpu_check.py --require-gpu

## make compose-check [KEEP=1]: by hand (as root; not part of make test or CI), the Dockerfile and
## docker-compose.yml for real on this machine without a registry: a private dockerd, every image built
## here (debootstrap base, test-only stand-ins for python, postgres, redis, minio and nginx), the stack up
## through nginx, the digits demo trained with web and worker restarts mid-trial, checkpoint downloads
## (tar, presigned S3), then everything removed and the host's iptables/ip_forward put back; per-phase
## times and var/compose-check.json. KEEP=1 keeps the images in var/compose-check/ for the next run.
## Needs Debian's packages: apt-get install -y docker.io docker-compose debootstrap.
# No `install` prerequisite, as gpu-check: it uses the .venv as it is (the headway CLI, the client).
compose-check:
	deploy/compose-check/run.sh $(if $(KEEP),--keep-images)

clean:
	rm -rf var/
