// Command savepoint is the command line of Savepoint for people: it lists,
// shows, exports, verifies and deletes the sessions a running savepointd
// keeps, over the same gRPC API the agent loops use. `savepoint help` lists
// the commands and the exit codes.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is savepoint with its arguments, stdout and stderr; it returns the exit
// code. The address comes from --addr, else client.DefaultAddr().
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(ctx, args)
}
