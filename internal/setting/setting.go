// Package setting owns the one definition of a setting of the lab's
// configs (loadgen.Config, capacity.Config): its key in a scenario file,
// its command-line flag, what it means and the field of the config it
// lands in; and the three things read from that definition: the flags a
// command registers (bound to the field, defaulting to its value), a
// file's YAML decoded straight into the config, and the JSON copy of what a
// file set (the spec a run's result.json carries).
//
// It must not hold state (the tables are the configs' packages') nor
// import other imlab packages but scenario/yamltime, the files' duration.
package setting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"imlab/scenario/yamltime"
)

// Setting is one setting of a config of type C.
type Setting[C any] struct {
	// Key is its key in a file ("": files do not offer it).
	Key string
	// Flag is its command-line flag ("": command lines do not offer it).
	Flag string
	// Doc is what it means (the flag's usage).
	Doc string
	// Field is where it lands in a config: a pointer to the field, one of
	// *int, *uint64, *float64, *string, *bool, *time.Duration, or a
	// Registrar (a setting of several flags of its own, decoded from a
	// file as its own type).
	Field func(c *C) any
}

// Registrar is a setting that registers its own flags (clientmix.Mix: a
// preset and one flag per key).
type Registrar interface {
	RegisterFlags(fs *pflag.FlagSet)
}

// Table is the settings of one config type, each once.
type Table[C any] []Setting[C]

// Flags are the flag names the table offers, in its order.
func (t Table[C]) Flags() []string {
	var out []string
	for _, s := range t {
		if s.Flag != "" {
			out = append(out, s.Flag)
		}
	}
	return out
}

// Register registers the table's flags on fs, each bound to its field in
// c and defaulting to the field's current value; names limits them to the
// named ones (all when none). An unknown name, or a field of a type a flag
// cannot have, is an error, and then nothing is registered.
func (t Table[C]) Register(fs *pflag.FlagSet, c *C, names ...string) error {
	all := t.Flags()
	for _, n := range names {
		if !slices.Contains(all, n) {
			return fmt.Errorf("no flag %q (have %v)", n, all)
		}
	}
	var adds []func()
	for _, s := range t {
		if s.Flag == "" || (len(names) > 0 && !slices.Contains(names, s.Flag)) {
			continue
		}
		add, err := flagOf(fs, s.Flag, s.Doc, s.Field(c))
		if err != nil {
			return err
		}
		adds = append(adds, add)
	}
	for _, add := range adds {
		add()
	}
	return nil
}

// flagOf is the registration of one flag bound to field p.
func flagOf(fs *pflag.FlagSet, name, doc string, p any) (func(), error) {
	switch p := p.(type) {
	case *int:
		return func() { fs.IntVar(p, name, *p, doc) }, nil
	case *uint64:
		return func() { fs.Uint64Var(p, name, *p, doc) }, nil
	case *float64:
		return func() { fs.Float64Var(p, name, *p, doc) }, nil
	case *string:
		return func() { fs.StringVar(p, name, *p, doc) }, nil
	case *bool:
		return func() { fs.BoolVar(p, name, *p, doc) }, nil
	case *time.Duration:
		return func() { fs.DurationVar(p, name, *p, doc) }, nil
	case Registrar:
		return func() { p.RegisterFlags(fs) }, nil
	}
	return nil, fmt.Errorf("flag %s: a field of type %T cannot be a flag", name, p)
}

// durationType is a config's duration; a file writes it as a yamltime.Duration.
var durationType = reflect.TypeFor[time.Duration]()

// fileType is how a field of type t is written in a file.
func fileType(t reflect.Type) reflect.Type {
	if t == durationType {
		return reflect.TypeFor[yamltime.Duration]()
	}
	return t
}

// field is the settable field s lands in.
func (s Setting[C]) field(c *C) reflect.Value { return reflect.ValueOf(s.Field(c)).Elem() }

// Lookup is the setting of a file key.
func (t Table[C]) Lookup(key string) (Setting[C], bool) {
	for _, s := range t {
		if s.Key != "" && s.Key == key {
			return s, true
		}
	}
	return Setting[C]{}, false
}

// KeyTypes maps the table's file keys to the type each is written as
// (a duration as yamltime.Duration), for a file's key check.
func (t Table[C]) KeyTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var c C
	for _, s := range t {
		if s.Key != "" {
			out[s.Key] = fileType(s.field(&c).Type())
		}
	}
	return out
}

// DecodeYAML decodes mapping n: the table's keys into their fields in c,
// every other key into rest (a pointer to the struct of the file's own
// keys, decoded as yaml decodes it). A null node sets nothing.
func (t Table[C]) DecodeYAML(n *yaml.Node, c *C, rest any) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping (key: value lines)", n.Line)
	}
	own := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		s, ok := t.Lookup(k.Value)
		if !ok {
			own.Content = append(own.Content, k, v)
			continue
		}
		f := s.field(c)
		x := reflect.New(fileType(f.Type()))
		if err := v.Decode(x.Interface()); err != nil {
			return fmt.Errorf("line %d: %s: %w", k.Line, k.Value, err)
		}
		f.Set(x.Elem().Convert(f.Type()))
	}
	return own.Decode(rest)
}

// EncodeJSON writes rest's JSON object (the file's own keys) followed by
// every table key whose value in c differs from its value in def (what
// the file set), each as a file writes it. A zero c (a section built in
// code with no settings) writes none.
func (t Table[C]) EncodeJSON(c, def *C, rest any) ([]byte, error) {
	if reflect.ValueOf(c).Elem().IsZero() {
		def = c
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}"))
	for _, s := range t {
		if s.Key == "" {
			continue
		}
		f, d := s.field(c), s.field(def)
		if reflect.DeepEqual(f.Interface(), d.Interface()) {
			continue
		}
		v, err := json.Marshal(f.Convert(fileType(f.Type())).Interface())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Key, err)
		}
		k, _ := json.Marshal(s.Key)
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// DecodeJSON reads what EncodeJSON writes: the object whole into rest
// and, when it holds a table key, c becomes def with the table's keys set
// (with none, c is left as it is: EncodeJSON's zero).
func (t Table[C]) DecodeJSON(data []byte, c *C, def C, rest any) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if !slices.ContainsFunc(t, func(s Setting[C]) bool { _, ok := m[s.Key]; return s.Key != "" && ok }) {
		return json.Unmarshal(data, rest)
	}
	*c = def
	for _, s := range t {
		raw, ok := m[s.Key]
		if s.Key == "" || !ok {
			continue
		}
		f := s.field(c)
		x := reflect.New(fileType(f.Type()))
		if err := json.Unmarshal(raw, x.Interface()); err != nil {
			return fmt.Errorf("%s: %w", s.Key, err)
		}
		f.Set(x.Elem().Convert(f.Type()))
	}
	return json.Unmarshal(data, rest)
}
