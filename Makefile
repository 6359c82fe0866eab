# RocketBox: make run | make test | make bench | make peers. Everything runs from .venv.

PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV := .venv
VENV_PYTHON := $(VENV)/bin/python
# Touched after a successful install; the install re-runs when the packaging or
# the native helper's sources are newer than it.
INSTALL_STAMP := $(VENV)/.rocketbox-installed
INSTALL_INPUTS := setup.py pyproject.toml MANIFEST.in constraints.txt \
	cluster/_native/build.py $(wildcard cluster/_native/*.c cluster/_native/*.h) \
	cluster/message/record_format.py cluster/shm/commitlog_format.py cluster/message/batch_format.py \
	cluster/shm/indexfile_format.py cluster/shm/consumequeue_format.py cluster/field_tables.py \
	cluster/message/properties.py cluster/message/sysflags.py

.PHONY: venv install real-clients node-client browser grpc-java console-screenshots test run bench peers bench-compare clean distclean

venv: $(VENV_PYTHON)

$(VENV_PYTHON):
	$(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install -c constraints.txt --upgrade pip

install: $(INSTALL_STAMP)

$(INSTALL_STAMP): $(VENV_PYTHON) $(INSTALL_INPUTS)
	$(VENV_PYTHON) -m pip install -c constraints.txt -e '.[test]'
	touch $@

# RocketMQ's own clients, the judges of compatibility (tests/remoting/), each in a venv of its own:
# they install the same top-level package, `rocketmq`. A failed install (no network) does not stop
# `make test`: the tests that need a client then skip and say why.
RMQ4_VENV := .venv-rocketmq4
RMQ4_STAMP := $(RMQ4_VENV)/.installed
# RocketMQ 5's gRPC client (tests/grpc/): the version the proxy is tested against, with what it pulls
# in pinned by constraints.txt (the proxy imports the same package's generated protocol modules).
RMQ5_VENV := .venv-rocketmq5
RMQ5_STAMP := $(RMQ5_VENV)/.installed
real-clients: $(RMQ4_STAMP) $(RMQ5_STAMP)

$(RMQ4_STAMP):
	-$(PYTHON) -m venv $(RMQ4_VENV) && $(RMQ4_VENV)/bin/python -m pip install -q 'rocketmq==0.4.4' && touch $@

$(RMQ5_STAMP): constraints.txt
	-$(PYTHON) -m venv --clear $(RMQ5_VENV) && $(RMQ5_VENV)/bin/python -m pip install -q -c constraints.txt \
		'rocketmq-python-client==5.1.2' && touch $@

# Debian's chromium for the console's browser tests (tests/console/, driven by Playwright's Python API;
# Playwright's own browser download is never used). A failed install does not stop `make test`: the
# browser tests then skip and say why.
# Not root: sudo only where it needs no password (never a prompt in the middle of make test).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null || { echo \
		"make browser: chromium is missing and installing it needs root (sudo would ask for a password); the browser tests will skip" >&2; \
		exit 0; }; $(SUDO_N) apt-get update -q && \
		$(SUDO_N) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium \
		fonts-dejavu-core || echo "make browser: chromium could not be installed; the browser tests will skip" >&2; }

# grpc-java (Netty) from Debian, RocketMQ's main 5.x client's gRPC stack, for tests/grpc/test_grpc_java_front.py
# (tests/grpc/grpc_java.py builds its probe at test time): a JDK, protoc with the grpc-java plugin, the jars.
# Nothing is done when every one is there; apt-get update only when a package is not known to apt yet.
# A failed install does not stop `make test`: those tests then skip and say why.
GRPC_JAVA_PACKAGES := default-jdk-headless libgrpc-java libprotobuf-java libperfmark-java \
	libgeronimo-annotation-1.3-spec-java protobuf-compiler protobuf-compiler-grpc-java-plugin
grpc-java:
	@missing=$$(dpkg-query -W -f='$${db:Status-Abbrev} $${Package}\n' $(GRPC_JAVA_PACKAGES) 2>&1 | awk '$$1 != "ii" {print $$NF}'); \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null || { echo \
		"make grpc-java: $$missing missing and installing needs root (sudo would ask for a password); the grpc-java tests will skip" >&2; \
		exit 0; }; \
		{ apt-cache show $(GRPC_JAVA_PACKAGES) >/dev/null 2>&1 || $(SUDO_N) apt-get update -q; } && \
		$(SUDO_N) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(GRPC_JAVA_PACKAGES) \
		|| echo "make grpc-java: grpc-java could not be installed; the grpc-java tests will skip" >&2; }

# The console's screenshots in docs/console/ (a small cluster with traffic, shot in headless chromium).
console-screenshots: install browser
	$(VENV_PYTHON) -m tests.console.screenshots docs/console

# pytest exits 5 when it collects nothing: that is a failure too, and says so. Two workers take one
# work unit at a time: a test file (module fixtures stay whole), or one of the two lists of CPU-heavy
# files in tests/conftest.py (CPU_HEAVY_UNITS), so at most two of those load the machine while the
# files that mostly wait run beside them. TEST_WORKERS=0 runs the suite in one process. Narrow it:
# make test TESTS=tests/unit/test_acl.py PYTEST_ARGS='-k signature' (any pytest options).
TEST_WORKERS ?= 2
TESTS ?= tests
PYTEST_ARGS ?=
test: install real-clients browser grpc-java
	@$(VENV_PYTHON) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) $(TESTS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; \
	exit $$status

# make run RUN_ARGS='--faults'  (any flag of python -m rocketbox.spark.job --help)
RUN_ARGS ?=
run: install
	$(VENV_PYTHON) -m rocketbox.spark.job $(RUN_ARGS)

bench: install
	$(VENV_PYTHON) -m rocketbox.perf

# The peers `python -m rocketbox.perf --compare` measures ours against: Redis Streams and NATS JetStream
# servers from Debian (apt, as root or through sudo), their clients into .venv (the `peers` extra).
# Not part of `make test`: the comparison skips a peer that is not installed.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SUDO_N := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)
peers: install
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server nats-server
	$(VENV_PYTHON) -m pip install -c constraints.txt -e '.[test,peers]'
	touch $(INSTALL_STAMP)

# RocketMQ 5's official Node.js client (npm rocketmq-client-nodejs), the gRPC door's row of
# `--compare` (perf/grpc_node_bench.js), into .node/ (ignored by git); never installed at test or bench
# time. The comparison skips that row, saying why, when node or this client is missing.
NODE_DIR := .node
NODE_CLIENT_VERSION := 1.0.8
NODE_STAMP := $(NODE_DIR)/.installed-$(NODE_CLIENT_VERSION)
node-client: $(NODE_STAMP)

$(NODE_STAMP):
	@command -v npm >/dev/null 2>&1 || { echo "make node-client: npm is not on PATH (Node.js >= 16 with npm is needed)" >&2; exit 1; }
	mkdir -p $(NODE_DIR)
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --save-exact 'rocketmq-client-nodejs@$(NODE_CLIENT_VERSION)'
	touch $@

bench-compare: install
	$(VENV_PYTHON) -m rocketbox.perf --compare

# Build output only; distclean also removes the venv.
clean:
	rm -rf build dist *.egg-info $(INSTALL_STAMP)
	rm -f cluster/_native/_rocketbox_native.c cluster/_native/*.o cluster/_native/*.so
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(RMQ4_VENV) $(RMQ5_VENV) $(NODE_DIR)
