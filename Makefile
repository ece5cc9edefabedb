# Drover: `make demo` runs a real migration step by step on the local stack; `make test` runs the lint, format and
# type checks (`make lint`), the wheel as a user installs it (`make package`) and then the test suite. They install
# what they need first: a virtual environment in .venv (pip, the exact versions of requirements.lock), Kafka jars from
# Maven Central on first use (into .cache/), and for the tests the docker-compose checker, Chromium, Prometheus and
# PostgreSQL (Debian packages); the test on Temporal server builds it from its Go module into .cache/ (Go needed).

PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
DROVER := $(VENV)/bin/drover
PYTEST_ARGS ?=

.PHONY: demo test lint install lock package docker-compose chromium prometheus postgresql stack-down clean

demo: $(STAMP)
	$(DROVER) sandbox up
	$(DROVER) demo

# The tests on the real stack and the rest run side by side (tests/run); PYTEST_ARGS runs one pytest with them.
test: lint package docker-compose chromium prometheus postgresql
	tests/run $(PYTEST_ARGS)

# Lint, format and type check (configured in pyproject.toml); `make test` and CI run it first.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

install: $(STAMP)

# The exact versions of requirements.lock (checked against its hashes), then Drover itself, editable, on top of them.
$(STAMP): pyproject.toml requirements.lock
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet --require-hashes -r requirements.lock
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $(STAMP)

# requirements.lock anew from pyproject.toml's ranges: the newest versions within them, every file's hash (pip-tools,
# in a virtual environment of its own under .cache/).
LOCK_VENV := .cache/lock-venv
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && \
		$(LOCK_VENV)/bin/pip install --quiet "pip-tools>=7.6,<8"; }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --strip-extras \
		--extra test --extra connect --extra ui --no-emit-find-links \
		--unsafe-package drover --output-file requirements.lock pyproject.toml

# The wheel as a user installs it, into a fresh virtual environment outside the source tree (tests/package/check).
package: $(STAMP)
	tests/package/check

docker-compose:
	@command -v docker-compose >/dev/null || { \
		echo "installing docker-compose (Debian package) for the compose-file check"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get install -y -q docker-compose >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q docker-compose >/dev/null; }; }

# Headless Chromium (Debian package) renders drover report's page in its test.
chromium:
	@command -v chromium >/dev/null || { \
		echo "installing chromium (Debian package) to render the report in its test"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium >/dev/null; }; }

# A Prometheus server (Debian package) scrapes the test sandbox's brokers in the test of that traffic source; its
# promtool checks and unit-tests the alerting rules in deploy/prometheus.
prometheus:
	@command -v prometheus >/dev/null || { \
		echo "installing prometheus (Debian package) for the test of reading broker traffic through its query API"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null; }; }

# PostgreSQL (Debian package) holds the data of the Temporal server the production-shaped test runs (`drover sandbox
# up --temporal server`); the test builds the server itself from its Go module.
postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null || { \
		echo "installing postgresql (Debian package) for the test on Temporal server"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q --no-install-recommends postgresql >/dev/null; }; }

stack-down:
	$(DROVER) sandbox down

clean:
	-test -x $(DROVER) && $(DROVER) sandbox down --wipe
	rm -rf $(VENV) .cache
