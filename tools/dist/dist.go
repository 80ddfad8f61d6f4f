package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Config is one run of dist.
type Config struct {
	Version   string     // the version stamped into the binaries and naming the archives
	Out       string     // the output directory, created if missing
	Platforms []Platform // the platforms built
	Epoch     int64      // the mtime of every archive entry, in seconds since 1970
	PureWheel string     // the pure-Python wheel to make platform wheels from; "": none
	NPMClient string     // the built TypeScript client's directory; "": no npm packages
	Root      string     // the repository's root; "": the working directory
}

// Platform is a GOOS/GOARCH pair that dist builds for.
type Platform struct{ OS, Arch string }

// Platforms are the platforms a release ships.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// PlatformNames returns Platforms as GOOS/GOARCH strings.
func PlatformNames() []string {
	var s []string
	for _, p := range Platforms {
		s = append(s, p.String())
	}
	return s
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms parses a comma-separated GOOS/GOARCH list; every one must
// be in Platforms.
func ParsePlatforms(s string) ([]Platform, error) {
	var ps []Platform
	for f := range strings.SplitSeq(s, ",") {
		os, arch, _ := strings.Cut(strings.TrimSpace(f), "/")
		p := Platform{os, arch}
		if !slices.Contains(Platforms, p) {
			return nil, fmt.Errorf("platform %q is not one of %s", f, strings.Join(PlatformNames(), ", "))
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// npmOS and npmCPU are the platform's process.platform and process.arch.
func (p Platform) npmOS() string { return p.OS }
func (p Platform) npmCPU() string {
	if p.Arch == "amd64" {
		return "x64"
	}
	return p.Arch
}

// NPMName is the name of the platform's npm package.
func (p Platform) NPMName() string {
	return "@savepoint-dev/savepointd-" + p.npmOS() + "-" + p.npmCPU()
}

// Commands are the binaries a release carries.
var Commands = []string{"savepointd", "savepoint"}

const versionVar = "github.com/savepoint-dev/savepoint/internal/version.version"

// Run builds every artifact of cfg into cfg.Out and writes SHA256SUMS.
func Run(cfg Config) error {
	if cfg.Version == "" {
		return errors.New("no version given")
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "savepoint-dist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var npmVersion string
	if cfg.NPMClient != "" {
		if npmVersion, err = packageVersion(cfg.NPMClient); err != nil {
			return err
		}
	}
	for _, p := range cfg.Platforms {
		bin := filepath.Join(tmp, p.OS+"_"+p.Arch)
		if err := Build(cfg.Root, p, cfg.Version, bin); err != nil {
			return err
		}
		for _, c := range Commands {
			if err := CheckBinary(filepath.Join(bin, c), p); err != nil {
				return err
			}
		}
		if _, err := Tarball(cfg, p, bin); err != nil {
			return err
		}
		if cfg.PureWheel != "" {
			if _, err := Wheel(cfg, p, bin); err != nil {
				return err
			}
		}
		if cfg.NPMClient != "" {
			if err := NPMPlatformPackage(cfg, p, bin, npmVersion, filepath.Join(tmp, "npm")); err != nil {
				return err
			}
		}
	}
	if cfg.PureWheel != "" {
		if _, err := PureWheel(cfg); err != nil {
			return err
		}
	}
	if cfg.NPMClient != "" {
		if err := NPMClientPackage(cfg, npmVersion, filepath.Join(tmp, "npm-client")); err != nil {
			return err
		}
	}
	return WriteSums(cfg.Out)
}

// Build cross-compiles Commands for p into dir, reproducibly: CGO off,
// -trimpath, an empty build id and the version stamped as `make build` does.
func Build(root string, p Platform, version, dir string) error {
	pkgs := make([]string, len(Commands))
	for i, c := range Commands {
		pkgs[i] = "./cmd/" + c
	}
	return build(root, p, version, dir+"/", pkgs...)
}

// build runs go build for p, as Build describes, writing out (a directory
// ending in a slash, or a file for one package).
func build(root string, p Platform, version, out string, pkgs ...string) error {
	args := append([]string{"build", "-trimpath", "-ldflags", fmt.Sprintf("-buildid= -X '%s=%s'", versionVar, version), "-o", out}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", p, err)
	}
	return nil
}

// CheckBinary returns an error unless path is an executable of p: an ELF of
// its machine for linux, a Mach-O of its CPU for darwin.
func CheckBinary(path string, p Platform) error {
	switch p.OS {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			return fmt.Errorf("%s: not an ELF file: %w", path, err)
		}
		defer f.Close()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		if f.Machine != want || f.Type != elf.ET_EXEC {
			return fmt.Errorf("%s: ELF %s %s, want an executable for %s", path, f.Type, f.Machine, want)
		}
		if slices.ContainsFunc(f.Progs, func(pr *elf.Prog) bool { return pr.Type == elf.PT_INTERP }) {
			return fmt.Errorf("%s: dynamically linked, want a static executable", path)
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			return fmt.Errorf("%s: not a Mach-O file: %w", path, err)
		}
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		if f.Cpu != want || f.Type != macho.TypeExec {
			return fmt.Errorf("%s: Mach-O %s %s, want an executable for %s", path, f.Type, f.Cpu, want)
		}
	default:
		return fmt.Errorf("%s: unknown OS %q", path, p.OS)
	}
	return nil
}

// MachOMinOS returns the oldest macOS a Mach-O executable runs on, from its
// LC_BUILD_VERSION load command, as major and minor.
func MachOMinOS(path string) (major, minor int, err error) {
	f, err := macho.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	const lcBuildVersion = 0x32
	for _, l := range f.Loads {
		b := l.Raw()
		if len(b) >= 16 && f.ByteOrder.Uint32(b) == lcBuildVersion {
			v := binary.LittleEndian.Uint32(b[12:16]) // minos, as xxxx.yy.zz
			return int(v >> 16), int(v >> 8 & 0xff), nil
		}
	}
	return 0, 0, fmt.Errorf("%s: no LC_BUILD_VERSION load command", path)
}

// file is one entry of an archive dist writes.
type file struct {
	name string
	mode int64
	data []byte
}

// releaseFiles are the files of p's archive besides the binaries.
func releaseFiles(root string) ([]file, error) {
	var fs []file
	for _, f := range []struct{ src, dst string }{
		{"LICENSE", "LICENSE"},
		{"contrib/systemd/savepointd.service", "systemd/savepointd.service"},
		{"contrib/systemd/savepointd.socket", "systemd/savepointd.socket"},
		{"contrib/systemd/savepoint.sysusers.conf", "systemd/savepoint.sysusers.conf"},
	} {
		b, err := os.ReadFile(filepath.Join(root, f.src))
		if err != nil {
			return nil, err
		}
		fs = append(fs, file{f.dst, 0o644, b})
	}
	return fs, nil
}

// archiveReadme is the README.md of a release archive.
const archiveReadme = `# Savepoint %s (%s)

savepointd is the checkpoint-and-recovery daemon for AI agent loops;
savepoint is its command-line client.

Run it for yourself:

    ./savepointd --data-dir ~/.local/state/savepoint/data

or install it as a service (as root):

    install -m 0755 savepointd savepoint /usr/local/bin/
    install -m 0644 systemd/savepointd.service systemd/savepointd.socket /usr/local/lib/systemd/system/
    install -m 0644 systemd/savepoint.sysusers.conf /usr/local/lib/sysusers.d/savepoint.conf
    systemd-sysusers && systemctl daemon-reload && systemctl enable --now savepointd.socket

The Python (pip install savepoint) and TypeScript (npm install
@savepoint-dev/client) clients carry savepointd and start it on demand.
Documentation: docs/install.md and docs/operations.md in the source.
`

// Tarball writes cfg.Out/savepoint_VERSION_OS_ARCH.tar.gz of p's binaries in
// bin and the release files, and returns its path.
func Tarball(cfg Config, p Platform, bin string) (string, error) {
	base := fmt.Sprintf("savepoint_%s_%s_%s", cfg.Version, p.OS, p.Arch)
	files, err := releaseFiles(cfg.Root)
	if err != nil {
		return "", err
	}
	files = append(files, file{"README.md", 0o644, fmt.Appendf(nil, archiveReadme, cfg.Version, p)})
	bins, err := readBinaries(bin)
	if err != nil {
		return "", err
	}
	files = append(files, bins...)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })

	out := filepath.Join(cfg.Out, base+".tar.gz")
	return out, writeAtomic(out, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		if err != nil {
			return err
		}
		tw := tar.NewWriter(zw)
		mtime := time.Unix(cfg.Epoch, 0)
		dirs := map[string]bool{}
		for _, f := range files {
			for d := path.Dir(base + "/" + f.name); d != "."; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		dirList := slices.Sorted(maps.Keys(dirs))
		for _, d := range dirList {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
				return err
			}
		}
		for _, f := range files {
			h := &tar.Header{Typeflag: tar.TypeReg, Name: base + "/" + f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatUSTAR}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return zw.Close()
	})
}

// readBinaries reads Commands from dir, executable.
func readBinaries(dir string) ([]file, error) {
	var fs []file
	for _, c := range Commands {
		b, err := os.ReadFile(filepath.Join(dir, c))
		if err != nil {
			return nil, err
		}
		fs = append(fs, file{c, 0o755, b})
	}
	return fs, nil
}

// writeAtomic writes path through a temporary file renamed into place.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// WriteSums writes dir/SHA256SUMS: the sha256 of every other file in dir,
// sorted by name, as sha256sum prints them.
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "SHA256SUMS" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), e.Name())
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}
