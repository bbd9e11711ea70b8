package scenario

import (
	"strings"
	"testing"
)

// TestDeadLettersSpec: expect.dead_letters and server.lab_transient_window
// parse, and bad values are errors naming the key.
func TestDeadLettersSpec(t *testing.T) {
	base := `name: d
server:
  policy: store
  lab_transient_window: %WINDOW%
load:
  rate: const:10
  duration: 2s
  users: 4
expect:
  verdict: valid
  dead_letters: %DL%
`
	mk := func(window, dl string) string {
		return strings.NewReplacer("%WINDOW%", window, "%DL%", dl).Replace(base)
	}
	f, err := Parse("ok.yaml", []byte(mk("1500ms", "{min: 1, max: 500, accounted: true, retried: true}")))
	if err != nil {
		t.Fatal(err)
	}
	d := f.Expect.DeadLetters
	if f.Server.LabTransientWindow.D().Milliseconds() != 1500 || d == nil || *d.Min != 1 || *d.Max != 500 || !d.Accounted || !d.Retried {
		t.Fatalf("parsed %+v, window %s", d, f.Server.LabTransientWindow.D())
	}
	for _, c := range []struct{ window, dl, key string }{
		{"100ms", "{min: 1}", "server.lab_transient_window"},
		{"20m", "{min: 1}", "server.lab_transient_window"},
		{"1500ms", "{min: -1}", "expect.dead_letters.min"},
		{"1500ms", "{max: -2}", "expect.dead_letters.max"},
		{"1500ms", "{min: 5, max: 2}", "expect.dead_letters"},
		{"1500ms", "{}", "expect.dead_letters"},
		{"1500ms", "{mni: 1}", "mni"},
	} {
		_, err := Parse("bad.yaml", []byte(mk(c.window, c.dl)))
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("window %s, dead_letters %s: %v; want an error naming %s", c.window, c.dl, err, c.key)
		}
	}
	strict := strings.Replace(mk("1500ms", "{min: 1}"), "policy: store", "policy: strict", 1)
	if _, err := Parse("strict.yaml", []byte(strict)); err == nil || !strings.Contains(err.Error(), "expect.dead_letters") {
		t.Errorf("dead letters without Kafka: %v", err)
	}
}
