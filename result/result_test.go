package result

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"imlab/scenario"
)

func f64(v float64) *float64 { return &v }

func dur(d time.Duration) *scenario.Duration {
	x := scenario.Duration(d)
	return &x
}

func sampleResult() *Result {
	return &Result{
		Format: ResultFormat, Scenario: "sample", Description: "d", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 12.5,
		Settings: []Setting{{"policy", "strict"}, {"backends", "mysql=x"}}, Backends: "mysql=x",
		Findings: []FindingSummary{{Name: "lost", Count: 2, Pairs: 3, MsgIDs: []uint64{5, 6}, Examples: []string{"msg 5 missing on dev 1"}}},
		Checks: []Check{{Name: "verdict", Want: "valid", Got: "invalid", OK: false}, {Name: "max_lost", Want: "<= 0", Got: "2"},
			{Name: "drain_complete", Want: "true", Got: "true", OK: true}},
		Events: []FaultEvent{{At: 1, Fault: "redis_wipe", Action: "inject", Affected: 10}, {At: 1.1, Fault: "redis_wipe", Action: "heal"}},
		Sends:  []SendSecond{{T: 1.1, Started: 100, OK: 99, Fail: 1, AckP50: AckMs(99, 1500), AckP99: AckMs(99, 9000)}, {T: 2.1, Started: 100, OK: 100, AckP50: AckMs(100, 1000), AckP99: AckMs(100, 4000)}},
		Lag:    []LagSample{{T: 1, MaxAge: map[string]float64{"imlab-inbox": 0.5}, Records: map[string]int64{"imlab-inbox": 3}}, {T: 2, Err: "down"}},
		Spec:   &scenario.File{Name: "sample", Expect: scenario.ExpectSpec{MaxAckP99: dur(time.Second), MaxLagAge: dur(time.Second)}},
		Errors: []string{"a note"},
	}
}

func TestJUnit(t *testing.T) {
	r1 := sampleResult()
	r2 := &Result{Scenario: "broken", Incomplete: true, Errors: []string{"backends: unavailable"}}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r1, r2); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Errors   int    `xml:"errors,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("junit does not parse: %v\n%s", err, buf.String())
	}
	if doc.Tests != 4 || doc.Failures != 2 || doc.Errors != 1 || len(doc.Suites) != 2 {
		t.Fatalf("counts: tests %d failures %d errors %d suites %d\n%s", doc.Tests, doc.Failures, doc.Errors, len(doc.Suites), buf.String())
	}
	s := doc.Suites[0]
	if s.Name != "sample" || s.Tests != 3 || s.Failures != 2 || s.Errors != 0 {
		t.Fatalf("suite %+v", s)
	}
	if s.Cases[1].Failure == nil || !strings.Contains(s.Cases[1].Failure.Message, "want <= 0, got 2") || !strings.Contains(s.Cases[1].Failure.Text, "msg 5 missing") {
		t.Fatalf("failure %+v", s.Cases[1].Failure)
	}
	if s.Cases[2].Failure != nil {
		t.Fatal("a passing check has a failure")
	}
	if doc.Suites[1].Errors != 1 || doc.Suites[1].Cases[0].Error == nil {
		t.Fatalf("incomplete run: %+v", doc.Suites[1])
	}
}

func TestResultRoundTrip(t *testing.T) {
	r := sampleResult()
	p := filepath.Join(t.TempDir(), ResultFile)
	if err := WriteFile(p, r.WriteJSON); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Path != p {
		t.Fatalf("read from %q, want %q", back.Path, p)
	}
	back.Path = ""
	if !reflect.DeepEqual(r, back) {
		t.Fatalf("round trip differs:\n%+v\n%+v", r, back)
	}
	if _, err := ReadResult(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("missing file read")
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResult(bad); err == nil {
		t.Fatal("bad json read")
	}
}
