package scenario

import (
	"strings"
	"testing"

	"imlab/loadgen/clientmix"
)

const mixFile = `
name: t
load:
  rate: const:10
  duration: 2s
  users: 4
  mix:
    enter_on_online: 0.5
    open_on_push: 0.1
    history_page: 20
    revoke: 0.005
    delete: 0.01
    clear: 0.002
    read: 0.8
expect:
  verdict: valid
`

// load.mix is clientmix.Mix with its own keys; a bad value is refused
// naming the key; without the block the mix is off.
func TestLoadMix(t *testing.T) {
	f, err := Parse("m.yaml", []byte(mixFile))
	if err != nil {
		t.Fatal(err)
	}
	if f.Load.Config.Mix != clientmix.Default() {
		t.Fatalf("load.mix %+v, want the default mix", f.Load.Config.Mix)
	}
	for key, bad := range map[string]string{
		"mix.revoke":       "revoke: -0.5",
		"mix.read":         "read: 1.5",
		"mix.history_page": "history_page: 1000",
	} {
		src := replaceKey(mixFile, strings.SplitN(bad, ":", 2)[0], bad)
		if _, err := Parse("m.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming it", bad, err)
		}
	}
	if _, err := Parse("m.yaml", []byte(strings.Replace(mixFile, "revoke: 0.005", "revoke_rate: 0.005", 1))); err == nil {
		t.Error("an unknown mix key was accepted")
	}
	plain, err := Parse("p.yaml", []byte(strings.Split(mixFile, "  mix:")[0]+"expect:\n  verdict: valid\n"))
	if err != nil || plain.Load.Config.Mix.On() {
		t.Fatalf("without load.mix: %+v %v", plain.Load.Config.Mix, err)
	}
}

// replaceKey replaces the line of key in src's mix block with line.
func replaceKey(src, key, line string) string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" && strings.HasPrefix(strings.TrimSpace(l), key+":") {
			lines[i] = "    " + line
		}
	}
	return strings.Join(lines, "\n")
}
