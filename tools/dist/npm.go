package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// packageVersion returns the version in dir/package.json.
func packageVersion(dir string) (string, error) {
	var pkg struct{ Version string }
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err == nil && pkg.Version == "" {
		err = fmt.Errorf("%s/package.json has no version", dir)
	}
	return pkg.Version, err
}

// NPMPlatformPackage writes p's npm package (NPMName: the binaries under
// bin/, LICENSE, a README, package.json with os and cpu, so that npm installs
// only the one matching the machine) under stage and packs it into cfg.Out.
func NPMPlatformPackage(cfg Config, p Platform, bin, version, stage string) error {
	dir := filepath.Join(stage, p.npmOS()+"-"+p.npmCPU())
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	pkg := map[string]any{
		"name":            p.NPMName(),
		"version":         version,
		"description":     fmt.Sprintf("savepointd and the savepoint CLI for %s, the binaries of @savepoint-dev/client (which installs this package on %s only)", p, p),
		"license":         "Apache-2.0",
		"os":              []string{p.npmOS()},
		"cpu":             []string{p.npmCPU()},
		"files":           []string{"bin"},
		"preferUnplugged": true,
	}
	b, err := json.MarshalIndent(pkg, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{"package.json": append(b, '\n')}
	files["README.md"] = fmt.Appendf(nil, "# %s\n\nsavepointd %s and the savepoint CLI for %s. Install @savepoint-dev/client, which depends on this package optionally and runs the binary it needs.\n", p.NPMName(), cfg.Version, p)
	if files["LICENSE"], err = os.ReadFile(filepath.Join(cfg.Root, "LICENSE")); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	bins, err := readBinaries(bin)
	if err != nil {
		return err
	}
	for _, f := range bins {
		if err := os.WriteFile(filepath.Join(dir, "bin", f.name), f.data, 0o755); err != nil {
			return err
		}
	}
	return npmPack(dir, cfg.Out)
}

// NPMClientPackage packs the TypeScript client in cfg.NPMClient into
// cfg.Out with the platform packages of cfg.Platforms as its optional
// dependencies, at the client's version. The repository's package.json
// does not list them, since they exist only once dist has built them.
func NPMClientPackage(cfg Config, version, stage string) error {
	packed := filepath.Join(stage, "packed")
	if err := os.MkdirAll(packed, 0o755); err != nil {
		return err
	}
	if err := npmPack(cfg.NPMClient, packed); err != nil {
		return err
	}
	tgzs, err := filepath.Glob(filepath.Join(packed, "*.tgz"))
	if err != nil || len(tgzs) != 1 {
		return fmt.Errorf("npm pack of %s: want one tarball, got %v (%v)", cfg.NPMClient, tgzs, err)
	}
	dir := filepath.Join(stage, "client")
	if err := untgz(tgzs[0], dir); err != nil {
		return err
	}
	pkgDir := filepath.Join(dir, "package")
	pj := filepath.Join(pkgDir, "package.json")
	b, err := os.ReadFile(pj)
	if err != nil {
		return err
	}
	// The text is kept as it is, since the order of keys matters to npm
	// and Node (the conditions of "exports"): the field goes at the end.
	var pkg map[string]json.RawMessage
	if err := json.Unmarshal(b, &pkg); err != nil {
		return err
	}
	if _, ok := pkg["optionalDependencies"]; ok {
		return fmt.Errorf("%s already lists optionalDependencies", pj)
	}
	var opt strings.Builder
	for i, p := range cfg.Platforms {
		if i > 0 {
			opt.WriteString(",")
		}
		fmt.Fprintf(&opt, "\n    %q: %q", p.NPMName(), version)
	}
	text := strings.TrimRight(string(b), " \n")
	if !strings.HasSuffix(text, "}") {
		return fmt.Errorf("%s does not end with }", pj)
	}
	b = []byte(strings.TrimRight(strings.TrimSuffix(text, "}"), " \n") + ",\n  \"optionalDependencies\": {" + opt.String() + "\n  }\n}")
	if err := os.WriteFile(pj, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return npmPack(pkgDir, cfg.Out)
}

// npmPack runs npm pack in dir, writing the tarball into out.
func npmPack(dir, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.Command("npm", "pack", "--silent", "--ignore-scripts", "--pack-destination", abs)
	cmd.Dir = dir
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm pack in %s: %w: %s", dir, err, stderr.String())
	}
	return nil
}

// untgz extracts the regular files and directories of a .tgz into dir.
func untgz(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the directory", path, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
