# What git tracks: no executable binary (ELF, Mach-O, PE) anywhere, and no
# file larger than 1 MiB outside a testdata directory (tools/checkfiles).
# Built files, profiles and scratch output belong in .gitignore.

.PHONY: checkfiles
checkfiles: ## Fail if git tracks an executable binary, or a file over 1 MiB outside testdata/
	go run ./tools/checkfiles

lint: checkfiles
