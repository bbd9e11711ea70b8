// Package scenarios holds the shipped scenario files (the YAML in this
// directory; the long runs in full/) and compiles them in as FS, so that a
// binary runs them wherever it is started. The file format is package
// scenario's; the runner is package runner's.
//
// It must not hold Go code beyond this embedding.
package scenarios

import "embed"

// FS holds the scenario files of this directory (not full/).
//
//go:embed *.yaml
var FS embed.FS
