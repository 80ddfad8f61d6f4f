package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: Linux reports
// them in USER_HZ, which is 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// Memory is a process's resident memory, in bytes, as /proc reports it.
type Memory struct {
	RSS  int64 // VmRSS: all resident pages
	Anon int64 // RssAnon: anonymous pages (the Go heap, stacks)
	File int64 // RssFile: file-backed pages (Badger's mapped tables and logs)
	HWM  int64 // VmHWM: the peak RSS since the process started
}

// parseStatus reads the memory fields of a /proc/PID/status file. Every
// field must be there: a kernel without RssAnon cannot tell anonymous from
// file-backed memory, and the benchmark must not guess.
func parseStatus(b []byte) (Memory, error) {
	var m Memory
	fields := map[string]*int64{"VmRSS": &m.RSS, "RssAnon": &m.Anon, "RssFile": &m.File, "VmHWM": &m.HWM}
	if err := parseKB(b, fields); err != nil {
		return Memory{}, fmt.Errorf("status: %w", err)
	}
	return m, nil
}

// Rollup is the part of /proc/PID/smaps_rollup the benchmark reports, in
// bytes.
type Rollup struct {
	RSS       int64 // Rss: every resident page of every mapping
	Anonymous int64 // Anonymous: resident anonymous pages
}

// FileBacked is the resident memory that is not anonymous: mapped files.
func (r Rollup) FileBacked() int64 { return r.RSS - r.Anonymous }

// parseSmapsRollup reads the Rss and Anonymous lines of smaps_rollup.
func parseSmapsRollup(b []byte) (Rollup, error) {
	var r Rollup
	if err := parseKB(b, map[string]*int64{"Rss": &r.RSS, "Anonymous": &r.Anonymous}); err != nil {
		return Rollup{}, fmt.Errorf("smaps_rollup: %w", err)
	}
	return r, nil
}

// parseKB sets each named "Name:   123 kB" line's value, in bytes; a name
// that is missing or a value that is not a number is an error.
func parseKB(b []byte, fields map[string]*int64) error {
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		dst, want := fields[name]
		if !ok || !want {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if unit != "kB" {
			return fmt.Errorf("%s: %q is not in kB", name, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		*dst = kb << 10
		seen[name] = true
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for name := range fields {
		if !seen[name] {
			return fmt.Errorf("no %s line", name)
		}
	}
	return nil
}

// parseStatCPU returns utime + stime from a /proc/PID/stat line. The command
// name (field 2) is in parentheses and may hold spaces and parentheses, so
// the fields are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	s := strings.TrimSpace(string(b))
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name in %q", s)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(3) ppid(4) ... utime(14) stime(15), so utime and
	// stime are f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("stat: utime/stime %q is not a tick count", v)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// parseIOWriteBytes returns write_bytes from /proc/PID/io: the bytes of page
// cache the process dirtied (by write or through a shared mapping), counted
// in whole pages, which is what it caused the disk to write. On kernels
// whose page cache holds large folios (ext4 from Linux 6.16), a clean folio
// dirtied again is counted whole: an 8 KiB pwrite + fdatasync at one
// offset of a file counted 2 MiB on the benchmark's machine (6.18), while
// the disk wrote about 8 KiB.
func parseIOWriteBytes(b []byte) (int64, error) { return parseIOField(b, "write_bytes") }

// parseIOField returns the named field of /proc/PID/io.
func parseIOField(b []byte, name string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("io: %s: %v", name, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("io: no %s line", name)
}

// Proc reads one process's figures from /proc; pid 0 means this process.
type Proc struct{ PID int }

func (p Proc) read(name string) ([]byte, error) {
	dir := "self"
	if p.PID != 0 {
		dir = strconv.Itoa(p.PID)
	}
	return os.ReadFile("/proc/" + dir + "/" + name)
}

// Memory returns the process's resident memory from /proc/PID/status.
func (p Proc) Memory() (Memory, error) {
	b, err := p.read("status")
	if err != nil {
		return Memory{}, err
	}
	return parseStatus(b)
}

// Rollup returns the process's resident memory from /proc/PID/smaps_rollup.
func (p Proc) Rollup() (Rollup, error) {
	b, err := p.read("smaps_rollup")
	if err != nil {
		return Rollup{}, err
	}
	return parseSmapsRollup(b)
}

// CPU returns the process's CPU time so far, user plus system.
func (p Proc) CPU() (time.Duration, error) {
	b, err := p.read("stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// WriteBytes returns the bytes the process has caused to be written to disk.
func (p Proc) WriteBytes() (int64, error) {
	b, err := p.read("io")
	if err != nil {
		return 0, err
	}
	return parseIOWriteBytes(b)
}

// WriteChars returns wchar from /proc/PID/io: the bytes the process has
// passed to write(2) and its kin, to files, sockets and pipes alike; what it
// writes through a shared mapping is not in it.
func (p Proc) WriteChars() (int64, error) {
	b, err := p.read("io")
	if err != nil {
		return 0, err
	}
	return parseIOField(b, "wchar")
}

// MachineCPU is the machine's CPU time from the first line of /proc/stat,
// summed over every CPU.
type MachineCPU struct {
	Total time.Duration // every state, steal included
	Idle  time.Duration // idle and iowait: time no process wanted a CPU
}

// Busy is the share of m's CPU time, since an earlier reading, that was not
// idle: used by some process, the kernel, or stolen by the hypervisor.
func (m MachineCPU) Busy(since MachineCPU) float64 {
	total := m.Total - since.Total
	if total <= 0 {
		return 0
	}
	return 1 - float64(m.Idle-since.Idle)/float64(total)
}

// parseMachineCPU reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal (guest time is already counted in user).
func parseMachineCPU(b []byte) (MachineCPU, error) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("/proc/stat: first line %q is not the cpu line with at least 8 counters", line)
	}
	var m MachineCPU
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return MachineCPU{}, fmt.Errorf("/proc/stat: counter %q is not a tick count", v)
		}
		d := time.Duration(n) * clockTick
		m.Total += d
		if i == 3 || i == 4 {
			m.Idle += d
		}
	}
	return m, nil
}

// ReadMachineCPU returns the machine's CPU time so far.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	return parseMachineCPU(b)
}
