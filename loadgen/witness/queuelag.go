package witness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"imlab/loadgen/summary"
	"imlab/targets"
)

// QueueLagAtEnd reads the queue lag once (targets.LabDriver.QueueLag)
// into the summary.
func (w *Witness) QueueLagAtEnd(ctx context.Context, sum *summary.Summary) {
	end := &summary.QueueLagEnd{}
	sum.QueueLag = end
	if w.env.Lab == nil {
		end.Unknown = "the " + w.env.Drv.Name() + " driver reads no queue lag"
		return
	}
	q, err := w.env.Lab.QueueLag(ctx)
	var te *targets.Error
	switch {
	case errors.Is(err, targets.ErrNoQueue):
		end.NoQueue = true
		return
	case errors.As(err, &te) && te.Status == 404:
		end.Unknown = "the queue lag route answered 404"
		if te.Message != "" {
			end.Unknown += ": " + te.Message
		}
		return
	case err != nil:
		end.Unknown = err.Error()
		return
	}
	end.OutboxBacklog, end.Errors = q.OutboxBacklog, q.Errors
	groups := map[string]bool{}
	for g := range q.Records {
		groups[g] = true
	}
	for g := range q.MaxAgeSeconds {
		groups[g] = true
	}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		gl := summary.GroupLag{Group: g, Records: q.Records[g], Drained: q.Records[g] == 0 && q.UnknownAge[g] == 0}
		if a, ok := q.MaxAgeSeconds[g]; ok && q.UnknownAge[g] == 0 {
			gl.OldestAgeS = &a
		}
		end.Groups = append(end.Groups, gl)
	}
}

// inboxTierPoll is how often WaitInboxTier reads the queue lag.
const inboxTierPoll = 250 * time.Millisecond

// inboxTier is the reference server's consumer group that writes the
// inboxes a device pulls (the history tier has its own and its own wait).
const inboxTier = "imlab-inbox"

// inboxBehind says what of the way into the inboxes has not drained (""
// when nothing): records of the inbox tier's consumer group not yet
// processed (or waiting with an age the server could not read), and the
// outbox rows the relay has not yet published.
func inboxBehind(q targets.QueueLag) string {
	var parts []string
	if n := q.Records[inboxTier]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d records of %s not yet processed", n, inboxTier))
	}
	if n := q.UnknownAge[inboxTier]; n > 0 && q.Records[inboxTier] == 0 {
		parts = append(parts, fmt.Sprintf("%d partitions of %s with records of unknown age", n, inboxTier))
	}
	if q.OutboxBacklog > 0 {
		parts = append(parts, fmt.Sprintf("%d outbox rows not yet published", q.OutboxBacklog))
	}
	return strings.Join(parts, ", ")
}

// WaitInboxTier waits, until deadline, for everything on its way to an
// inbox to arrive there: a message the server has ACKed but still holds in
// its queue or outbox is late, not lost, and a witness read before it
// arrives would call it lost. It returns "" once the tier has drained (or
// the target has no queue to wait for: no lab route, or no inbox group),
// else what was still behind at the deadline.
func (w *Witness) WaitInboxTier(ctx context.Context, deadline time.Time) string {
	for {
		if w.env.Lab == nil {
			return "" // a driver without the lab's queue lag: nothing to wait for
		}
		q, err := w.env.Lab.QueueLag(ctx)
		if err != nil {
			// No lab route (404) or no queue: nothing to wait for that the
			// lab can see; the pull rounds alone decide.
			return ""
		}
		behind := inboxBehind(q)
		if behind == "" {
			return ""
		}
		if time.Now().Add(inboxTierPoll).After(deadline) {
			return behind
		}
		select {
		case <-time.After(inboxTierPoll):
		case <-ctx.Done():
			return behind
		}
	}
}
