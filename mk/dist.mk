# Release artifacts (tools/dist): `make dist` writes into dist/, for every
# platform of DIST_PLATFORMS, savepoint_VERSION_OS_ARCH.tar.gz (savepointd,
# savepoint, LICENSE, the systemd units and sysusers file, a README), the
# Python client's platform wheel carrying both binaries, and the npm package
# @savepoint-dev/savepointd-OS-CPU; then the pure-Python wheel, the
# TypeScript client's npm tarball (the platform packages as its optional
# dependencies) and SHA256SUMS. Two runs on one commit give the same bytes:
# every archive's mtimes are the commit's time. docs/install.md describes
# what each holds.

DIST_DIR ?= dist
SOURCE_DATE_EPOCH ?=
DIST_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
DIST_EPOCH = $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null),0)

TEST_TARGETS += test-dist

.PHONY: dist
dist: clients-typescript ## Release archives, platform wheels and npm packages for DIST_PLATFORMS into dist/, with SHA256SUMS
	rm -rf $(DIST_DIR)
	mkdir -p $(DIST_DIR)
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	SOURCE_DATE_EPOCH=$(DIST_EPOCH) $(PYTHON) -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$$tmp" ./$(PY_DIR); \
	pure="$$(echo "$$tmp"/savepoint-*-py3-none-any.whl)"; \
	go run ./tools/dist -version '$(BUILD_VERSION)' -out $(DIST_DIR) -platforms '$(DIST_PLATFORMS)' \
		-epoch $(DIST_EPOCH) -pywheel "$$pure" -npm-client $(TS_DIR)
	@cat $(DIST_DIR)/SHA256SUMS

# The packaging test: linux/amd64's artifacts built by make dist and
# installed as a user would (tools/dist/e2e/run.sh: the wheel into a fresh
# venv, the npm tarballs into a fresh project, on a PATH without Go, each
# started on demand, killed and started again), and TestReproducible with
# -full: savepointd and savepoint built twice give the same bytes, static
# executables; make dist has just compiled everything in the release's
# configuration, so that costs two links and packs. In test-go,
# tools/dist's tests build tools/dist/testdata/small (nothing but main)
# under each command's name, in seconds: TestReproducible (two builds of
# linux/amd64 pack the same bytes) and TestDarwin (a darwin build is a
# Mach-O of its CPU, with the wheel tag of the macOS it needs).
# test-dist-full runs them all with -full, which also builds savepointd and
# savepoint themselves for both darwin CPUs (about four minutes on 2 cores),
# then make dist for every platform of DIST_PLATFORMS and the same
# end-to-end test.
.PHONY: test-dist
test-dist: ## Packaging: the linux/amd64 wheel and npm packages installed and run end to end, and the release binaries built twice to the same bytes
	$(MAKE) --no-print-directory dist DIST_PLATFORMS=linux/amd64 DIST_DIR=$(BIN)/dist-test
	go test -count=1 -run '^TestReproducible$$' ./tools/dist -full
	tools/dist/e2e/run.sh $(BIN)/dist-test '$(BUILD_VERSION)'

.PHONY: test-dist-full
test-dist-full: ## Packaging in full: tools/dist's tests with savepointd and savepoint cross-compiled for darwin/amd64 and arm64, make dist for every DIST_PLATFORMS, the end-to-end test
	go test -count=1 ./tools/dist/... -full
	$(MAKE) --no-print-directory dist DIST_DIR=$(BIN)/dist-test
	tools/dist/e2e/run.sh $(BIN)/dist-test '$(BUILD_VERSION)'
