// Command small is the program tools/dist's tests build in their short
// form, under each command's name: an executable of the same toolchain,
// linker and flags as a release's binaries (a static ELF, a Mach-O of each
// darwin CPU), built in seconds rather than the minutes savepointd and its
// dependencies take. `make test-dist` and `make test-dist-full` run the
// tests with -full, on savepointd and savepoint themselves.
package main

func main() {}
