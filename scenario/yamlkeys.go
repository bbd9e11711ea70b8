package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkKeys walks a YAML document against the type it decodes into (File)
// before it is decoded, so that a mistake is reported in the file's own
// words: an unknown key names the key, its line, where it is and the
// nearest valid key (with every valid one); a value of the wrong kind names
// its key, its line and what it wants. The decoder's own messages name Go
// types ("field duraton not found in type scenarios.LoadSpec").
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	if n == nil || n.Kind == 0 {
		return nil // an empty document: the decoder says so
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			if err := checkKeys(c, t, path); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind == yaml.AliasNode {
		return checkKeys(n.Alias, t, path)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNull(n) {
		return nil
	}
	if k, ok := reflect.New(t).Interface().(keyed); ok {
		return checkMapping(n, k.yamlKeys(), path)
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		// Its own decoder checks it (a duration, a baseline): its message,
		// with the key in front.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return fmt.Errorf("line %d: %s: %s", n.Line, where(path), lineRE.ReplaceAllString(err.Error(), ""))
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkMapping(n, yamlFields(t), path)
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("line %d: %s: want a list (lines starting with \"- \", or [a, b]), got %s", n.Line, where(path), got(n))
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %s: want a mapping (key: value lines), got %s", n.Line, where(path), got(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s: want %s, got %s", n.Line, where(path), kindWords(t), got(n))
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return fmt.Errorf("line %d: %s: want %s, got %q", n.Line, where(path), kindWords(t), n.Value)
	}
	return nil
}

// keyed is a section whose keys are not (all) its struct's fields (a
// section that decodes the settings of a config through their table): it
// names them, with the type each is written as.
type keyed interface {
	yamlKeys() map[string]reflect.Type
}

// checkMapping checks a mapping against a section's keys (fields: key ->
// the type it is written as).
func checkMapping(n *yaml.Node, fields map[string]reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping (key: value lines), got %s", n.Line, where(path), got(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		if !ok {
			return unknownKey(k, path, fields)
		}
		if line, dup := seen[k.Value]; dup {
			return fmt.Errorf("line %d: %s: given twice (first on line %d)", k.Line, where(join(path, k.Value)), line)
		}
		seen[k.Value] = k.Line
		if err := checkKeys(v, ft, join(path, k.Value)); err != nil {
			return err
		}
	}
	return nil
}

// yamlFields maps a struct's yaml keys to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
			continue
		case strings.Contains(opts, "inline"):
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// unknownKey names the key, its line, where it is, the nearest valid key
// and every valid one.
func unknownKey(k *yaml.Node, path string, fields map[string]reflect.Type) error {
	valid := make([]string, 0, len(fields))
	for name := range fields {
		valid = append(valid, name)
	}
	slices.Sort(valid)
	msg := fmt.Sprintf("line %d: unknown key %q in %s", k.Line, k.Value, section(path))
	if near := nearest(k.Value, valid); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return fmt.Errorf("%s (valid keys: %s)", msg, strings.Join(valid, ", "))
}

// nearest is the valid key closest to s by edit distance, when it is close
// enough to be a typo of it ("" otherwise).
func nearest(s string, valid []string) string {
	best, dist := "", max(1, len(s)/3)+1
	for _, v := range valid {
		if d := editDistance(s, v); d < dist {
			best, dist = v, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// lineRE is the "line N: " a decoder puts in front of its message.
var lineRE = regexp.MustCompile(`^line \d+: `)

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

func section(path string) string {
	if path == "" {
		return "the file's top level"
	}
	return path
}

// got says what a node holds, in the file's words.
func got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

// kindWords says what a scalar type wants, in words.
func kindWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a " + t.Kind().String()
}
