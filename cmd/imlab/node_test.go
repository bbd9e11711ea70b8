package main

import "testing"

func TestNodeFromOrdinal(t *testing.T) {
	for _, c := range []struct {
		base int
		host string
		want uint16
		err  bool
	}{
		{10, "imlab-api-0", 10, false},
		{10, "imlab-api-3", 13, false},
		{0, "imlab-consumer-12", 12, false},
		{10, "laptop", 0, true},
		{10, "imlab-api-", 0, true},
		{1020, "imlab-api-4", 0, true},
	} {
		got, err := nodeFromOrdinal(c.base, c.host)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("nodeFromOrdinal(%d, %q) = %d, %v; want %d, error %v", c.base, c.host, got, err, c.want, c.err)
		}
	}
}
