package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDeployRunsWhatCIRuns: the deploy workflow tests with .ci/run, as CI
// does (so a deploy never skips gofmt, vet, staticcheck, the fuzz targets
// or the zero-allocation pass), and rolls out with a built binary, whose
// exit codes reach the job (go run turns every failure into 1).
func TestDeployRunsWhatCIRuns(t *testing.T) {
	b, err := os.ReadFile("../../.github/workflows/deploy.yml")
	if err != nil {
		t.Fatal(err)
	}
	deploy := string(b)
	if !regexp.MustCompile(`(?m)^\s+run: bash \.ci/run$`).MatchString(deploy) {
		t.Error("deploy.yml does not run .ci/run")
	}
	if regexp.MustCompile(`(?m)^\s+run:.*\bgo test\b`).MatchString(deploy) {
		t.Error("deploy.yml runs go test itself instead of .ci/run")
	}
	if strings.Contains(deploy, "go run ./cmd/purrctl") {
		t.Error("deploy.yml runs purrctl through go run, which reports every failure as exit 1")
	}
	ci, err := os.ReadFile("../../.github/workflows/ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "run: bash .ci/run") {
		t.Error("ci.yml no longer runs .ci/run: the two workflows must run the same checks")
	}
}
