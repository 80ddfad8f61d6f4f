package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// rssSampler reads a process's memory figures from /proc/PID/status.
type rssSampler struct{ pid int }

// read returns the process's resident set size (VmRSS) in bytes.
func (r *rssSampler) read() (int64, error) { return r.readField("VmRSS:") }

// readField returns a "kB" field of /proc/PID/status in bytes.
func (r *rssSampler) readField(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field)
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %s%s: %v", r.pid, field, rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s line", r.pid, field)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpu returns the process's CPU time so far, user plus system
// (/proc/PID/stat fields 14 and 15).
func (r *rssSampler) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", r.pid)
	}
	f := strings.Fields(string(b[i+1:])) // from field 3 on
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", r.pid, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", r.pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// peerPID returns the pid of the process listening on a Unix socket, from
// the connection's peer credentials (SO_PEERCRED).
func peerPID(socket string) (int, error) {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	if cred.Pid <= 0 {
		return 0, errors.New("the peer's pid is not visible (another pid namespace?)")
	}
	return int(cred.Pid), nil
}
