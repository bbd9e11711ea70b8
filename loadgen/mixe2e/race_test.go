//go:build race

package mixe2e_test

// raceBuild: the race detector is on (each full-server run then takes
// several times as long).
const raceBuild = true
