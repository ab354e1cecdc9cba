package main

import (
	"runtime/debug"
	"strings"
)

// version is statescan's own version, as the Go toolchain recorded it in
// the binary: the module version of a `go install ...@v1.2.3`, or the
// pseudo-version a `go build` in a checkout stamps from its commit (with
// +dirty for uncommitted changes); failing those, the commit alone, or
// "devel". It is not the JSON report's format version (scan.ReportVersion).
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// versionOf is version for the build information bi (nil: none).
func versionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if dirty {
		rev += "+dirty"
	}
	return "devel-" + rev
}

// semver is v as SARIF's semanticVersion (Semantic Versioning 2.0, no
// leading v), or "" when v is not a module version.
func semver(v string) string {
	if s, ok := strings.CutPrefix(v, "v"); ok {
		return s
	}
	return ""
}
