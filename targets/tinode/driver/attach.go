package driver

import (
	"context"
	"fmt"
	"time"

	"imlab/targets/tinode"
)

// Attach retries. Tinode answers a {sub} with 503 "locked" while the topic
// is being unloaded (its last session left: a device that visited and
// went away, the witness) and accepts it once the topic is loaded again,
// as its own clients know: the driver asks again, a bounded number of
// times.
const (
	MaxAttachTries   = 20
	attachBackoff    = 10 * time.Millisecond
	attachMaxBackoff = 200 * time.Millisecond
)

// attach subscribes s to topic, asking again while the server answers 503.
func attach(ctx context.Context, s *tinode.Session, topic string) error {
	wait := attachBackoff
	for try := 1; ; try++ {
		_, err := s.Subscribe(ctx, topic)
		if err == nil || !tinode.IsCode(err, tinode.CodeUnavailable) {
			return err
		}
		if try == MaxAttachTries {
			return fmt.Errorf("%w (answered %d times: MaxAttachTries)", err, try)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (then: %w)", err, ctx.Err())
		}
		wait = min(2*wait, attachMaxBackoff)
	}
}
