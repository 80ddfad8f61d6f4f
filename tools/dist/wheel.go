package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// WheelTags returns the platform tags of p's wheel. A static Go executable
// (CGO off) needs no libc, so it qualifies for every manylinux and
// musllinux policy: manylinux_2_17 (manylinux2014, pip 19.3 and later) and
// musllinux_1_1. On macOS the tag names the oldest release the binary runs
// on, read from the binary itself, since Go's minimum moves with its
// release.
func WheelTags(p Platform, bin string) ([]string, error) {
	switch p.OS {
	case "linux":
		a := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[p.Arch]
		return []string{"manylinux_2_17_" + a, "manylinux2014_" + a, "musllinux_1_1_" + a}, nil
	case "darwin":
		major, minor, err := MachOMinOS(filepath.Join(bin, "savepointd"))
		if err != nil {
			return nil, err
		}
		if major >= 11 {
			minor = 0 // from macOS 11 on, pip matches only X_0
		}
		a := map[string]string{"amd64": "x86_64", "arm64": "arm64"}[p.Arch]
		return []string{fmt.Sprintf("macosx_%d_%d_%s", major, minor, a)}, nil
	}
	return nil, fmt.Errorf("no wheel tag for %s", p)
}

// Wheel writes p's platform wheel of the client into cfg.Out and returns
// its path: every file of cfg.PureWheel, the binaries in bin under the
// wheel's .data/scripts (which pip installs into the environment's bin
// directory, as ruff's wheels do), WHEEL with p's tags, and RECORD.
func Wheel(cfg Config, p Platform, bin string) (string, error) {
	tags, err := WheelTags(p, bin)
	if err != nil {
		return "", err
	}
	bins, err := readBinaries(bin)
	if err != nil {
		return "", err
	}
	return writeWheel(cfg, tags, bins)
}

// PureWheel writes cfg.PureWheel into cfg.Out as Wheel writes a platform
// wheel, with its own tags and no binaries, so that it too is the same
// bytes from run to run.
func PureWheel(cfg Config) (string, error) { return writeWheel(cfg, nil, nil) }

// writeWheel writes cfg.PureWheel's files with bins under .data/scripts,
// and tagged tags (nil: the pure wheel's own WHEEL), then RECORD.
func writeWheel(cfg Config, tags []string, bins []file) (string, error) {
	zr, err := zip.OpenReader(cfg.PureWheel)
	if err != nil {
		return "", err
	}
	defer zr.Close()
	// name-version-py3-none-any.whl
	parts := strings.Split(strings.TrimSuffix(filepath.Base(cfg.PureWheel), ".whl"), "-")
	if len(parts) != 5 {
		return "", fmt.Errorf("%s: not a wheel's file name", cfg.PureWheel)
	}
	distName, version := parts[0], parts[1]
	distInfo := distName + "-" + version + ".dist-info"
	var lib, info []file
	for _, f := range zr.File {
		if f.Name == distInfo+"/RECORD" || (tags != nil && f.Name == distInfo+"/WHEEL") || strings.HasSuffix(f.Name, "/") {
			continue
		}
		data, err := readZip(f)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(f.Name, distInfo+"/") {
			info = append(info, file{f.Name, 0o644, data})
		} else {
			lib = append(lib, file{f.Name, 0o644, data})
		}
	}
	name := filepath.Base(cfg.PureWheel)
	if tags != nil {
		var wheel strings.Builder
		wheel.WriteString("Wheel-Version: 1.0\nGenerator: savepoint tools/dist\nRoot-Is-Purelib: false\n")
		for _, t := range tags {
			fmt.Fprintf(&wheel, "Tag: py3-none-%s\n", t)
		}
		info = append(info, file{distInfo + "/WHEEL", 0o644, []byte(wheel.String())})
		name = fmt.Sprintf("%s-%s-py3-none-%s.whl", distName, version, strings.Join(tags, "."))
	}
	bins = slices.Clone(bins)
	for i := range bins {
		bins[i].name = distName + "-" + version + ".data/scripts/" + bins[i].name
	}
	byName := func(a, b file) int { return strings.Compare(a.name, b.name) }
	slices.SortFunc(lib, byName)
	slices.SortFunc(info, byName)
	files := slices.Concat(lib, bins, info)

	var record bytes.Buffer
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.data))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", distInfo)
	files = append(files, file{distInfo + "/RECORD", 0o644, record.Bytes()})

	out := filepath.Join(cfg.Out, name)
	return out, writeAtomic(out, func(w io.Writer) error {
		zw := zip.NewWriter(w)
		for _, f := range files {
			h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: zipTime(cfg.Epoch)}
			h.SetMode(0o644)
			if f.mode&0o111 != 0 {
				h.SetMode(0o755)
			}
			fw, err := zw.CreateHeader(h)
			if err != nil {
				return err
			}
			if _, err := fw.Write(f.data); err != nil {
				return err
			}
		}
		return zw.Close()
	})
}

// zipTime is epoch as a zip entry's time: zip has none before 1980.
func zipTime(epoch int64) time.Time {
	t := time.Unix(epoch, 0).UTC()
	if min := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC); t.Before(min) {
		return min
	}
	return t
}

func readZip(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
