package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/savepoint-dev/savepoint/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Daemon is a savepointd child process serving a data directory on a Unix
// socket. Stop ends it; its log is kept in its directory.
type Daemon struct {
	Socket  string        // the socket's path
	DataDir string        // the data directory it serves
	Started time.Duration // from exec to the health check answering SERVING
	Proc    Proc
	cmd     *exec.Cmd
	log     string
	done    chan error
}

// StartDaemon runs the savepointd binary bin on dataDir with its default
// settings and extra flags, listening on a socket in sockDir, and returns
// once it serves.
func StartDaemon(ctx context.Context, bin, dataDir, sockDir string, extra ...string) (*Daemon, error) {
	d := &Daemon{Socket: filepath.Join(sockDir, "s.sock"), DataDir: dataDir, log: filepath.Join(sockDir, "savepointd.log"), done: make(chan error, 1)}
	_ = os.Remove(d.Socket)
	logf, err := os.Create(d.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d.cmd = exec.Command(bin, append([]string{"--data-dir", dataDir, "--listen", "unix:" + d.Socket}, extra...)...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = daemonEnv()
	t0 := time.Now()
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	d.Proc = Proc{PID: d.cmd.Process.Pid}
	go func() { d.done <- d.cmd.Wait() }()
	if err := d.waitServing(ctx, 2*time.Minute); err != nil {
		d.kill()
		return nil, fmt.Errorf("savepointd on %s: %w; its log:\n%s", dataDir, err, d.Log())
	}
	d.Started = time.Since(t0)
	return d, nil
}

// daemonEnv is this process's environment without savepointd's own
// variables, so the daemon runs with its defaults whatever the shell set.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) >= 10 && kv[:10] == "SAVEPOINT_" || len(kv) >= 11 && kv[:11] == "GOMEMLIMIT=" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitServing waits for SERVING (client.WaitServing, which polls every 5
// ms), failing when the daemon exits first or timeout passes.
func (d *Daemon) waitServing(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exited := make(chan error, 1)
	go func() {
		select {
		case err := <-d.done:
			d.done <- err
			exited <- err
			cancel()
		case <-ctx.Done():
		}
	}()
	err := client.WaitServing(ctx, "unix:"+d.Socket)
	select {
	case e := <-exited:
		return fmt.Errorf("exited before serving: %v", e)
	default:
	}
	return err
}

// Dial returns a new gRPC connection to the daemon; the caller closes it.
func (d *Daemon) Dial() (*grpc.ClientConn, error) {
	return grpc.NewClient("unix:"+d.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Log returns what the daemon has written to stderr so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// Stop sends SIGTERM and waits for a clean exit; a daemon that exits with an
// error, or is still running after 30 s (then killed), is an error.
func (d *Daemon) Stop() error {
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			return fmt.Errorf("savepointd exited: %v; its log:\n%s", err, d.Log())
		}
		return nil
	case <-time.After(30 * time.Second):
		d.kill()
		return fmt.Errorf("savepointd did not stop within 30s of SIGTERM; killed")
	}
}

func (d *Daemon) kill() {
	_ = d.cmd.Process.Kill()
	err := <-d.done
	d.done <- err
}
