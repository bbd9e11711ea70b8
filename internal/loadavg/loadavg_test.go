package loadavg

import "testing"

// TestParse: /proc/loadavg's first three fields, anything else refused.
func TestParse(t *testing.T) {
	if v, ok := Parse("2.10 1.50 0.90 3/812 12345\n"); !ok || v != [3]float64{2.1, 1.5, 0.9} {
		t.Fatalf("parse: %v %v", v, ok)
	}
	for _, bad := range []string{"", "1.0 2.0", "a b c", "-1 0 0"} {
		if _, ok := Parse(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}
