package runner

import "imlab/result"

// byName indexes checks by name.
func byName(cs []result.Check) map[string]result.Check {
	m := map[string]result.Check{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}
