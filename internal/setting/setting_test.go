package setting

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

type inner struct {
	A int `yaml:"a" json:"a"`
}

func (in *inner) RegisterFlags(fs *pflag.FlagSet) { fs.IntVar(&in.A, "inner-a", in.A, "inner a") }

type conf struct {
	N     int
	U     uint64
	F     float64
	S     string
	B     bool
	D     time.Duration
	In    inner
	Quiet int // a flag only
}

type own struct {
	Name string `yaml:"name" json:"name"`
	conf `yaml:"-" json:"-"`
}

func table() Table[conf] {
	return Table[conf]{
		{Key: "n", Flag: "n", Doc: "an int", Field: func(c *conf) any { return &c.N }},
		{Key: "u", Flag: "u", Doc: "a uint", Field: func(c *conf) any { return &c.U }},
		{Key: "f", Flag: "f", Doc: "a float", Field: func(c *conf) any { return &c.F }},
		{Key: "s", Flag: "s", Doc: "a string", Field: func(c *conf) any { return &c.S }},
		{Key: "b", Flag: "b", Doc: "a bool", Field: func(c *conf) any { return &c.B }},
		{Key: "d_key", Flag: "d-flag", Doc: "a duration", Field: func(c *conf) any { return &c.D }},
		{Key: "in", Flag: "in", Field: func(c *conf) any { return &c.In }},
		{Flag: "quiet", Doc: "flag only", Field: func(c *conf) any { return &c.Quiet }},
	}
}

func def() conf { return conf{N: 1, U: 2, F: 0.5, S: "x", D: time.Second, In: inner{A: 3}, Quiet: 4} }

// TestRegister: one flag per setting, bound to its field, defaulting to
// its value; a Registrar registers its own; a subset by name; an unknown
// name or a field no flag can have refused with nothing registered.
func TestRegister(t *testing.T) {
	c := def()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	if err := table().Register(fs, &c); err != nil {
		t.Fatal(err)
	}
	if fs.Lookup("d-flag").DefValue != "1s" || fs.Lookup("n").Usage != "an int" || fs.Lookup("inner-a") == nil {
		t.Fatalf("flags: d %+v n %+v", fs.Lookup("d-flag"), fs.Lookup("n"))
	}
	if err := fs.Parse([]string{"--n", "7", "--u", "8", "--f", "0.25", "--s", "y", "--b", "--d-flag", "2ms", "--inner-a", "9", "--quiet", "5"}); err != nil {
		t.Fatal(err)
	}
	want := conf{N: 7, U: 8, F: 0.25, S: "y", B: true, D: 2 * time.Millisecond, In: inner{A: 9}, Quiet: 5}
	if c != want {
		t.Fatalf("parsed %+v, want %+v", c, want)
	}
	sub := pflag.NewFlagSet("sub", pflag.ContinueOnError)
	if err := table().Register(sub, &c, "n", "nope"); err == nil || sub.Lookup("n") != nil {
		t.Fatalf("unknown name: %v", err)
	}
	bad := Table[conf]{{Flag: "n", Field: func(c *conf) any { return &c.N }}, {Flag: "p", Field: func(c *conf) any { return &c }}}
	if err := bad.Register(sub, &c); err == nil || sub.Lookup("n") != nil {
		t.Fatalf("a field no flag can have: %v", err)
	}
}

// TestFile: a file's keys decode into their fields over the defaults, the
// others into the file's own; the JSON copy holds the own keys and what
// differs from the defaults, as the file writes it, and reads back to the
// same.
func TestFile(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("name: t\nn: 5\nd_key: 250ms\nin: {a: 6}\nb: true\n"), &n); err != nil {
		t.Fatal(err)
	}
	o := own{conf: def()}
	if err := table().DecodeYAML(n.Content[0], &o.conf, &o); err != nil {
		t.Fatal(err)
	}
	want := def()
	want.N, want.D, want.In, want.B = 5, 250*time.Millisecond, inner{A: 6}, true
	if o.Name != "t" || o.conf != want {
		t.Fatalf("decoded %+v", o)
	}
	d := def()
	b, err := table().EncodeJSON(&o.conf, &d, &o)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"name":"t","n":5,"b":true,"d_key":"250ms","in":{"a":6}}` {
		t.Fatalf("json %s", got)
	}
	back := own{}
	if err := table().DecodeJSON(b, &back.conf, def(), &back); err != nil {
		t.Fatal(err)
	}
	if back != o {
		t.Fatalf("read back %+v, want %+v", back, o)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	empty := own{conf: def()}
	if b, err := table().EncodeJSON(&empty.conf, &d, &struct{}{}); err != nil || string(b) != "{}" {
		t.Fatalf("nothing set: %s %v", b, err)
	}
	// A zero config (a section built in code) writes no setting and reads
	// back zero.
	zero := own{Name: "z"}
	if b, err = table().EncodeJSON(&zero.conf, &d, &zero); err != nil || string(b) != `{"name":"z"}` {
		t.Fatalf("zero: %s %v", b, err)
	}
	back = own{}
	if err := table().DecodeJSON(b, &back.conf, def(), &back); err != nil || back != zero {
		t.Fatalf("zero read back %+v %v", back, err)
	}
	if err := yaml.Unmarshal([]byte("d_key: 5\n"), &n); err != nil {
		t.Fatal(err)
	}
	if err := table().DecodeYAML(n.Content[0], &o.conf, &o); err == nil || !strings.Contains(err.Error(), "d_key") {
		t.Fatalf("a number for a duration: %v", err)
	}
	if kt := table().KeyTypes(); kt["d_key"].Name() != "Duration" || kt["d_key"].PkgPath() != "imlab/scenario/yamltime" || len(kt) != 7 {
		t.Fatalf("key types %v", kt)
	}
}
