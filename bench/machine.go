package main

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the run happens: CPUs, kernel, and the disk under
// the directory the stores are in.
func machine(dir string) *Table {
	t := &Table{Title: "Machine", Header: []string{"what", "value"}}
	t.Add("CPUs (nproc)", runtime.NumCPU())
	t.Add("CPU model", cpuModel())
	t.Add("kernel", strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")))
	t.Add("Go", runtime.Version())
	dev, fstype, opts := mountOf(dir)
	t.Add("stores in", dir+" ("+fstype+" on "+dev+", "+opts+")")
	t.Add("disk", diskOf(dev))
	t.Add("load average at the start", loadavg())
	return t
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func loadavg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	for line := range strings.Lines(readFile("/proc/cpuinfo")) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// mountOf returns the device, type and options of the mount holding dir:
// the longest mount point that is a prefix of its real path.
func mountOf(dir string) (dev, fstype, opts string) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "unknown", "unknown", ""
	}
	defer f.Close()
	best := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 4 {
			continue
		}
		mp := fl[1]
		if (real == mp || strings.HasPrefix(real, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			best, dev, fstype, opts = len(mp), fl[0], fl[2], fl[3]
		}
	}
	return dev, fstype, opts
}

// diskOf describes a block device from /sys: rotational or not, and its
// size.
func diskOf(dev string) string {
	name := filepath.Base(dev)
	sys := "/sys/class/block/" + name
	if _, err := os.Stat(sys); err != nil {
		return "unknown (" + dev + ")"
	}
	kind := "not rotational"
	if strings.TrimSpace(readFile(sys+"/queue/rotational")) == "1" {
		kind = "rotational flag set (virtio disks often report it, whatever backs them)"
	}
	if sectors := strings.TrimSpace(readFile(sys + "/size")); sectors != "" {
		if n, err := strconv.ParseInt(sectors, 10, 64); err == nil {
			kind = strconv.FormatInt(n*512>>30, 10) + " GiB, " + kind
		}
	}
	if sched := strings.TrimSpace(readFile(sys + "/queue/scheduler")); sched != "" {
		kind += ", scheduler " + sched
	}
	return name + ": " + kind
}
