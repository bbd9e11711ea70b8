package runner

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/result"
	"imlab/scenario"
)

// A file that says it is not for the embedded topology (capacity-smoke:
// a capacity search, which the embedded MySQL cannot hold still for) is
// skipped there with its reason, starts no server and no load, and
// passes: the glob on embedded no longer fails on it. Every output says
// skipped.
func TestRunSkipEmbedded(t *testing.T) {
	f, err := scenario.ReadFile("../scenarios/capacity-smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reason := strings.TrimSpace(f.Backends.SkipEmbedded)
	if !strings.Contains(reason, "capacity is not what the embedded topology is for") {
		t.Fatalf("capacity-smoke.yaml: skip_embedded %q", reason)
	}
	cfg := DefaultConfig(t.TempDir())
	cfg.Mode = "embedded"
	cfg.DataDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != reason || !res.Passed || res.Incomplete || len(res.Checks) != 0 || len(res.Processes) != 0 || res.Capacity != nil {
		t.Fatalf("skipped %q passed %v incomplete %v checks %d processes %d capacity %v; want skipped with the file's reason, passed, nothing run",
			res.Skipped, res.Passed, res.Incomplete, len(res.Checks), len(res.Processes), res.Capacity)
	}
	back, err := result.ReadResult(filepath.Join(cfg.OutDir, result.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.Skipped != reason || !back.Passed {
		t.Fatalf("result.json: skipped %q passed %v", back.Skipped, back.Passed)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, result.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Skipped int `xml:"skipped,attr"`
			Cases   []struct {
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 1 || doc.Suites[0].Skipped != 1 || len(doc.Suites[0].Cases) != 1 ||
		doc.Suites[0].Cases[0].Skipped == nil || doc.Suites[0].Cases[0].Skipped.Message != reason {
		t.Fatalf("junit.xml does not hold one skipped case with the reason:\n%s", b)
	}
	html, err := os.ReadFile(filepath.Join(cfg.OutDir, result.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte("skipped on these backends")) {
		t.Fatal("report.html does not say the run was skipped")
	}
}
