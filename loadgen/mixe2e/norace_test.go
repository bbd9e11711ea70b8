//go:build !race

package mixe2e_test

// raceBuild: the race detector is off.
const raceBuild = false
