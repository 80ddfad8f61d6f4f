# The web inspector `savepoint ui` (cmd/savepoint/internal/ui): its tests,
# the real-browser ones included (TestBrowser: headless Chromium driven by
# chromedp against a real savepointd), run in `make test-go`, which installs
# Debian's chromium with apt first when it is missing (apt-get update once)
# and gives the tests the browser's path, so that they fail, rather than
# skip, when Chromium is missing. (Under plain `go test ./...` the browser
# tests run when /usr/bin/chromium exists and skip otherwise.) `make
# test-ui` runs the inspector's tests alone; `make ui-screenshots` writes
# their screenshots into docs/ui/, which docs/operations.md shows (times and
# socket paths change with every run, so make test leaves the committed ones
# alone).

CHROMIUM ?= /usr/bin/chromium

.PHONY: chromium
chromium:
	@test -x $(CHROMIUM) || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
		{ echo "chromium: $(CHROMIUM) is missing and cannot be installed here (apt-get install chromium)" >&2; exit 1; }

test-go: chromium
test-go: export SAVEPOINT_CHROMIUM = $(CHROMIUM)

.PHONY: test-ui
test-ui: chromium ## Run the web inspector's tests alone, with headless Chromium (make test-go runs them too)
	SAVEPOINT_CHROMIUM=$(CHROMIUM) go test -race -count=1 ./cmd/savepoint/internal/ui

.PHONY: ui-screenshots
ui-screenshots: chromium ## Rewrite docs/ui/*.png, the inspector's screenshots, from TestBrowser, TestBrowserResolve and TestBrowserApprove
	SAVEPOINT_CHROMIUM=$(CHROMIUM) go test -count=1 -run '^TestBrowser(Resolve|Approve)?$$' ./cmd/savepoint/internal/ui -screenshots $(abspath docs/ui)
