package scenario

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"imlab/compare"
)

// BaselineCheck is the name of the check a baseline adds.
const BaselineCheck = "baseline"

// BaselineSpec names a previous result the run is gated on: every metric
// imlab compare reads from a scenario result (ACKed rate, ACK quantiles,
// errors, lag, recovery, findings, verdict, passed) must not be worse than
// the baseline's beyond its tolerance. Written as a path
// (`baseline: runs/main/smoke/result.json`) or a mapping with tolerances:
//
//	baseline:
//	  result: ../runs/main/smoke     # a result.json or its directory
//	  tolerance: 'ack_p99:+20%,rate:-5%'
//
// A relative path is relative to the scenario file's directory.
type BaselineSpec struct {
	Result    string `yaml:"result" json:"result"`
	Tolerance string `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
}

// UnmarshalYAML accepts a path or a mapping with result and tolerance.
func (b *BaselineSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		b.Result = n.Value
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: baseline.%s: want a string", v.Line, k.Value)
			}
			switch k.Value {
			case "result":
				b.Result = v.Value
			case "tolerance":
				b.Tolerance = v.Value
			default:
				return fmt.Errorf("line %d: baseline: unknown field %q (want result, tolerance)", k.Line, k.Value)
			}
		}
		return nil
	default:
		return fmt.Errorf("line %d: baseline: want a path or a mapping with result and tolerance", n.Line)
	}
}

func (b *BaselineSpec) validate() error {
	if b == nil {
		return nil
	}
	if strings.TrimSpace(b.Result) == "" {
		return Bad("baseline.result", "empty: want a result.json or its directory")
	}
	if _, err := compare.ParseTolerances(b.Tolerance); err != nil {
		return Bad("baseline.tolerance", "%v", err)
	}
	return nil
}
