package clientmix_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"imlab/ledger"
	"imlab/loadgen/clientmix"
)

// A bad mix is refused naming its key; the default is valid and on, the
// zero mix off; the flags set every field.
func TestMixValidation(t *testing.T) {
	if err := clientmix.Default().Validate(); err != nil || !clientmix.Default().On() {
		t.Fatalf("default mix: %v", err)
	}
	if (clientmix.Mix{}).On() {
		t.Fatal("the zero mix is on")
	}
	cases := map[string]func(*clientmix.Mix){
		"mix.revoke":          func(m *clientmix.Mix) { m.Revoke = -0.1 },
		"mix.delete":          func(m *clientmix.Mix) { m.Delete = 1.5 },
		"mix.open_on_push":    func(m *clientmix.Mix) { m.OpenOnPush = math.NaN() },
		"mix.enter_on_online": func(m *clientmix.Mix) { m.EnterOnOnline = 2 },
		"mix.clear":           func(m *clientmix.Mix) { m.Clear = -1 },
		"mix.read":            func(m *clientmix.Mix) { m.Read = 1.01 },
		"mix.history_page":    func(m *clientmix.Mix) { m.HistoryPage = clientmix.MaxHistoryPage + 1 },
	}
	for key, f := range cases {
		m := clientmix.Default()
		f(&m)
		err := m.Validate()
		if !errors.Is(err, clientmix.ErrInvalid) || !strings.Contains(err.Error(), key+" ") {
			t.Errorf("%s: %v, want ErrInvalid naming it", key, err)
		}
	}
}

// An action the target does not offer is refused naming the key that asks
// for it; a target that offers everything takes the default mix, and a
// mix that does not enter conversations needs no conversation actions.
func TestMixOffered(t *testing.T) {
	all := ledger.DefaultCapabilities()
	if err := clientmix.Default().Offered(all); err != nil {
		t.Fatal(err)
	}
	noRevoke := ledger.Capabilities{Driver: "x", Actions: []string{"conv-pull", "history", "delete", "clear", "read"}}
	err := clientmix.Default().Offered(noRevoke)
	if !errors.Is(err, clientmix.ErrInvalid) || !strings.Contains(err.Error(), "mix.revoke") || !strings.Contains(err.Error(), "driver x") {
		t.Fatalf("no revoke: %v", err)
	}
	noHistory := ledger.Capabilities{Driver: "x", Actions: []string{"conv-pull", "revoke", "delete", "clear", "read"}}
	if err := clientmix.Default().Offered(noHistory); err == nil || !strings.Contains(err.Error(), "mix.history_page") {
		t.Fatalf("no history: %v", err)
	}
	if err := (clientmix.Mix{Revoke: 0.1}).Offered(ledger.Capabilities{Driver: "x", Actions: []string{"revoke"}}); err != nil {
		t.Fatalf("revokes only: %v", err)
	}
	if err := (clientmix.Mix{}).Offered(ledger.Capabilities{Driver: "x"}); err != nil {
		t.Fatalf("mix off: %v", err)
	}
}

func TestMixFlags(t *testing.T) {
	m := clientmix.Default()
	f := pflag.NewFlagSet("load", pflag.ContinueOnError)
	m.RegisterFlags(f)
	if err := f.Parse([]string{"--mix-revoke=0.5", "--mix-history-page=7", "--mix-enter-on-online=0", "--mix-open-on-push=0.25", "--mix-delete=0.1", "--mix-clear=0", "--mix-read=1"}); err != nil {
		t.Fatal(err)
	}
	want := clientmix.Mix{EnterOnOnline: 0, OpenOnPush: 0.25, HistoryPage: 7, Revoke: 0.5, Delete: 0.1, Clear: 0, Read: 1}
	if m != want {
		t.Fatalf("flags set %+v, want %+v", m, want)
	}
	d := clientmix.Default()
	f2 := pflag.NewFlagSet("load", pflag.ContinueOnError)
	d.RegisterFlags(f2)
	if err := f2.Parse(nil); err != nil || d != clientmix.Default() {
		t.Fatalf("defaults through the flags: %+v %v", d, err)
	}
}

// The yaml keys are the documented ones: a scenario's load block decodes
// into the same struct, and an unknown key is refused.
func TestMixYAML(t *testing.T) {
	var m clientmix.Mix
	dec := yaml.NewDecoder(strings.NewReader("enter_on_online: 0.5\nopen_on_push: 0.1\nhistory_page: 20\nrevoke: 0.005\ndelete: 0.01\nclear: 0.002\nread: 0.8\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil || m != clientmix.Default() {
		t.Fatalf("decoded %+v %v, want the default mix", m, err)
	}
	dec = yaml.NewDecoder(strings.NewReader("revoke_rate: 0.1\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}

// --mix sets every key; a --mix-* flag after it overrides one; a bad
// preset is refused.
func TestMixPresetFlag(t *testing.T) {
	var m clientmix.Mix
	f := pflag.NewFlagSet("load", pflag.ContinueOnError)
	m.RegisterFlags(f)
	if err := f.Parse([]string{"--mix=default", "--mix-revoke=0"}); err != nil {
		t.Fatal(err)
	}
	want := clientmix.Default()
	want.Revoke = 0
	if m != want {
		t.Fatalf("--mix=default --mix-revoke=0: %+v", m)
	}
	if err := f.Parse([]string{"--mix=off"}); err != nil || m.On() {
		t.Fatalf("--mix=off: %+v %v", m, err)
	}
	if err := f.Parse([]string{"--mix=most"}); err == nil {
		t.Fatal("a bad preset was accepted")
	}
}
