package scenario

// DeadLettersSpec is expect.dead_letters: what the dead-letter topic must
// hold at the end of the run, read twice (the server's lab route GET
// /v1/lab/deadletters and the topic itself with the lab's own Kafka
// client), and how the lab must be able to account for it.
//
//   - min, max: bounds on the records in the dead-letter topic.
//   - accounted: the route and the topic agree letter by letter, and every
//     message whose record was in the fan-out topic but that the pipeline
//     did not deliver through the queue (repaired by reconciliation, or lost
//     at the end) is in a dead letter: nothing silently gone.
//   - retried: every letter given up for a transient error was retried for
//     at least the transient window in force (its headers say how long).
//
// Each needs the dead letters read whole: one that could not be read
// fails every check.
type DeadLettersSpec struct {
	Min       *int64 `yaml:"min,omitempty" json:"min,omitempty"`
	Max       *int64 `yaml:"max,omitempty" json:"max,omitempty"`
	Accounted bool   `yaml:"accounted,omitempty" json:"accounted,omitempty"`
	Retried   bool   `yaml:"retried,omitempty" json:"retried,omitempty"`
}

// validate checks the block against the file: dead letters need Kafka.
func (d *DeadLettersSpec) validate(f *File) error {
	if d == nil {
		return nil
	}
	switch {
	case !f.UsesKafka():
		return Bad("expect.dead_letters", "there is no dead-letter topic without Kafka: the strict policy without history does not use it")
	case d.Min != nil && *d.Min < 0:
		return Bad("expect.dead_letters.min", "%d: want >= 0", *d.Min)
	case d.Max != nil && *d.Max < 0:
		return Bad("expect.dead_letters.max", "%d: want >= 0", *d.Max)
	case d.Min != nil && d.Max != nil && *d.Min > *d.Max:
		return Bad("expect.dead_letters", "min %d above max %d", *d.Min, *d.Max)
	case d.Min == nil && d.Max == nil && !d.Accounted && !d.Retried:
		return Bad("expect.dead_letters", "states nothing: want min, max, accounted or retried")
	}
	return nil
}
