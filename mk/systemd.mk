# systemd and installation: `make install` places the binaries, the units of
# contrib/systemd and the sysusers file; `make test-systemd` (part of `make
# test`) installs into a temporary PREFIX and checks what it installed.
# docs/operations.md describes the units.

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
# systemd reads units and sysusers files under /usr/local/lib as well as /usr/lib.
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
SYSUSERS_DIR ?= $(PREFIX)/lib/sysusers.d
# The binaries installed: every cmd/* but the demo and the load generator.
INSTALL_CMDS ?= $(filter-out savepoint-demo savepoint-load,$(notdir $(CMDS)))

SYSTEMD_SRC := contrib/systemd
TEST_TARGETS += test-systemd

.PHONY: install
install: build ## Install the binaries, systemd units and sysusers file into DESTDIR/PREFIX (default /usr/local)
	install -d -m 0755 '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(SYSTEMD_UNIT_DIR)' '$(DESTDIR)$(SYSUSERS_DIR)'
	install -m 0755 $(addprefix $(BIN)/,$(INSTALL_CMDS)) '$(DESTDIR)$(BINDIR)/'
	@# The unit names the installed binary, wherever BINDIR is.
	sed 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' $(SYSTEMD_SRC)/savepointd.service > '$(DESTDIR)$(SYSTEMD_UNIT_DIR)/savepointd.service'
	chmod 0644 '$(DESTDIR)$(SYSTEMD_UNIT_DIR)/savepointd.service'
	install -m 0644 $(SYSTEMD_SRC)/savepointd.socket '$(DESTDIR)$(SYSTEMD_UNIT_DIR)/'
	install -m 0644 $(SYSTEMD_SRC)/savepoint.sysusers.conf '$(DESTDIR)$(SYSUSERS_DIR)/savepoint.conf'
	@echo "installed; as root: systemd-sysusers && systemctl daemon-reload && systemctl enable --now savepointd.socket"

# systemd-analyze and systemd-sysusers (Debian's systemd package): installed
# when missing and possible; test-systemd fails without them.
.PHONY: systemd-tools
systemd-tools:
	@command -v systemd-analyze >/dev/null && command -v systemd-sysusers >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq systemd) || \
		{ echo "test-systemd: systemd-analyze and systemd-sysusers are missing and cannot be installed here" >&2; exit 1; }

# `systemd-analyze verify` exits 0 on unknown keys and misspelt values, so any
# line on its stderr fails the check. It also fails when ExecStart names a
# missing binary: the installed units name the binary just installed.
.PHONY: test-systemd
test-systemd: systemd-tools ## Install into a temporary PREFIX, then verify the units (no stderr) and the sysusers file
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory install PREFIX="$$tmp/usr" DESTDIR= >/dev/null; \
	units="$$tmp/usr/lib/systemd/system"; \
	grep -qx "ExecStart=$$tmp/usr/bin/savepointd" "$$units/savepointd.service" || \
		{ echo "test-systemd: the installed service does not run $$tmp/usr/bin/savepointd" >&2; exit 1; }; \
	rc=0; systemd-analyze verify "$$units/savepointd.service" "$$units/savepointd.socket" 2>"$$tmp/verify.err" || rc=$$?; \
	if (( rc != 0 )) || [[ -s "$$tmp/verify.err" ]]; then \
		echo "test-systemd: systemd-analyze verify (exit $$rc):" >&2; cat "$$tmp/verify.err" >&2; exit 1; \
	fi; \
	mkdir -p "$$tmp/root/etc"; \
	systemd-sysusers --root="$$tmp/root" - < "$$tmp/usr/lib/sysusers.d/savepoint.conf" >/dev/null 2>"$$tmp/sysusers.err" || \
		{ cat "$$tmp/sysusers.err" >&2; exit 1; }; \
	grep -q '^savepoint:x:[0-9]*:[0-9]*:.*:/var/lib/savepoint:' "$$tmp/root/etc/passwd" && grep -q '^savepoint:x:' "$$tmp/root/etc/group" || \
		{ echo "test-systemd: savepoint.sysusers.conf did not create the savepoint user and group" >&2; exit 1; }; \
	echo "test-systemd: units verified, sysusers creates savepoint:savepoint"
