# The web inspector `savepoint ui` (cmd/savepoint/internal/ui): `make test-ui`
# (part of `make test`) installs Debian's chromium with apt when it is
# missing (apt-get update once), then runs the inspector's tests, the
# real-browser ones included (TestBrowser: headless Chromium driven by
# chromedp against a real savepointd), writing their screenshots of each
# screen into a temporary directory; `make ui-screenshots` writes them into
# docs/ui/, which docs/operations.md shows (times and socket paths change
# with every run, so make test leaves the committed ones alone). The test is given the
# browser's path, so it fails, rather than skips, when Chromium is missing.
# (Under plain `go test ./...` the browser tests run when /usr/bin/chromium
# exists and skip otherwise.)

CHROMIUM ?= /usr/bin/chromium

.PHONY: chromium
chromium:
	@test -x $(CHROMIUM) || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
		{ echo "chromium: $(CHROMIUM) is missing and cannot be installed here (apt-get install chromium)" >&2; exit 1; }

TEST_TARGETS += test-ui

.PHONY: test-ui
test-ui: chromium ## Run the web inspector's tests, with headless Chromium
	@shots="$$(mktemp -d)"; trap 'rm -rf "$$shots"' EXIT; \
	SAVEPOINT_CHROMIUM=$(CHROMIUM) go test -race -count=1 ./cmd/savepoint/internal/ui -screenshots "$$shots"

.PHONY: ui-screenshots
ui-screenshots: chromium ## Rewrite docs/ui/*.png, the inspector's screenshots, from TestBrowser
	SAVEPOINT_CHROMIUM=$(CHROMIUM) go test -count=1 -run '^TestBrowser$$' ./cmd/savepoint/internal/ui -screenshots $(abspath docs/ui)
