package scenario

import (
	"strings"
	"testing"
)

func TestSkipEmbeddedValidation(t *testing.T) {
	base := "name: s\nload: {rate: 'const:10', duration: 1s, users: 10}\nexpect: {verdict: valid}\n"
	for _, c := range []struct {
		backends string
		ok       bool
	}{
		{"backends: {skip_embedded: 'not for embedded'}\n", true},
		{"backends: {mode: local, skip_embedded: 'not for embedded'}\n", true},
		{"backends: {mode: embedded, skip_embedded: 'not for embedded'}\n", false},
		{"backends: {skip_embedded: '" + strings.Repeat("x", MaxSkipReason+1) + "'}\n", false},
	} {
		_, err := Parse("s.yaml", []byte(base+c.backends))
		if (err == nil) != c.ok {
			t.Errorf("%.60s: err %v, want ok=%v", c.backends, err, c.ok)
		}
	}
}
