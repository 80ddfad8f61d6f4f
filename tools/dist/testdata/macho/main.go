// Command macho is the smallest program TestDarwin cross-compiles in its
// short form: a Mach-O built by the same toolchain, linker and flags as a
// release's binaries, in seconds rather than minutes.
package main

func main() {}
