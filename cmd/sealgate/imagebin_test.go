package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var imageBin struct {
	once sync.Once
	path string
	err  error
}

// imageBinary builds sealgate once, with cmd/sealgate/Dockerfile's RUN
// line, word for word, and returns its path: what the image runs, and
// what the tests of whole processes run.
//
// SEALGATE_TEST_BINARY names another binary instead, to run the cases
// against an older build (what they found before the fixes).
func imageBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SEALGATE_TEST_BINARY"); p != "" {
		return p
	}
	imageBin.once.Do(func() {
		df, err := os.ReadFile("Dockerfile")
		if err != nil {
			imageBin.err = err
			return
		}
		m := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*) ./cmd/sealgate$`).FindSubmatch(df)
		if m == nil {
			imageBin.err = errors.New("Dockerfile: no RUN CGO_ENABLED=0 go build ... ./cmd/sealgate line")
			return
		}
		d, err := os.MkdirTemp("", "sealgate-image")
		if err != nil {
			imageBin.err = err
			return
		}
		imageBin.path = filepath.Join(d, "sealgate")
		words := strings.Fields(string(m[1]))
		var args []string
		for i := 2; i < len(words); i++ { // after CGO_ENABLED=0 go
			if words[i] == "-o" {
				args = append(args, "-o", imageBin.path)
				i++
				continue
			}
			args = append(args, words[i])
		}
		build := exec.Command("go", append(args, ".")...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			imageBin.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if imageBin.err != nil {
		t.Fatal(imageBin.err)
	}
	return imageBin.path
}
