package proc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"imlab/scenario"
)

const labRetentionFile = `
name: t
server:
  lab_retention:
    max_age: 40s
    pulled_min_age: 2s
    interval: 500ms
load:
  rate: const:10
  duration: 2s
  users: 4
expect:
  verdict: valid
`

// TestLabRetention: server.lab_retention reaches every process's config
// (in process and through the child spec) with the server's lab-only
// switch on; out-of-range values are refused naming the key; without it
// the server's defaults stay.
func TestLabRetention(t *testing.T) {
	f, err := scenario.Parse("r.yaml", []byte(labRetentionFile))
	if err != nil {
		t.Fatal(err)
	}
	spec := ChildSpec{Server: f.Server, Process: scenario.ProcessSpec{Name: "all", Roles: []string{"all"}}}
	// The child gets the spec as JSON: the block must survive it.
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var back ChildSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, s := range []ChildSpec{spec, back} {
		r := serverConfig(s, nil).Retention
		if !r.LabShortAges || r.MaxAge != 40*time.Second || r.PulledMinAge != 2*time.Second || r.Interval != 500*time.Millisecond {
			t.Fatalf("retention config %+v", r)
		}
	}
	plain := serverConfig(ChildSpec{Server: scenario.ServerSpec{}}, nil).Retention
	if plain.LabShortAges || plain.MaxAge != 30*24*time.Hour {
		t.Fatalf("without lab_retention: %+v", plain)
	}
	for _, bad := range []string{
		"max_age: 500ms\n    pulled_min_age: 0s\n    interval: 1s",
		"max_age: 10s\n    pulled_min_age: 20s\n    interval: 1s",
		"max_age: 10s\n    pulled_min_age: 1s\n    interval: 10ms",
		"max_age: 10s\n    pulled_min_age: 1s",
	} {
		src := strings.Replace(labRetentionFile, "max_age: 40s\n    pulled_min_age: 2s\n    interval: 500ms", bad, 1)
		if _, err := scenario.Parse("r.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "server.lab_retention") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
