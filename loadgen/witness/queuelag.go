package loadgen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"imlab/targets"
)

// GroupLag is one consumer group's lag when the run ended.
type GroupLag struct {
	Group   string `json:"group"`
	Records int64  `json:"records"`
	// OldestAgeS is the age of its oldest unprocessed message; nil when the
	// server could not measure it (unknown, never 0).
	OldestAgeS *float64 `json:"oldest_age_s"`
	Drained    bool     `json:"drained"`
}

// QueueLagEnd is the target's queue lag read once the run ended (after the
// final drain and the witness): whether each tier behind the queue caught
// up, or how far behind it still was. A tier may lag (a slow history
// store does); the run then says so instead of reading as done.
type QueueLagEnd struct {
	Groups        []GroupLag `json:"groups"`
	OutboxBacklog int64      `json:"outbox_backlog"`
	Errors        []string   `json:"errors,omitempty"`
	// Unknown says why the lag could not be read (e.g. a server without
	// the lab route); then Groups is empty.
	Unknown string `json:"unknown,omitempty"`
}

func (q *QueueLagEnd) String() string {
	if q == nil {
		return "not read"
	}
	if q.Unknown != "" {
		return "unknown (" + q.Unknown + ")"
	}
	if len(q.Groups) == 0 {
		return "no consumer group (no queue behind this server)"
	}
	var parts []string
	for _, g := range q.Groups {
		age := "age unknown"
		if g.OldestAgeS != nil {
			age = fmt.Sprintf("oldest %.1fs", *g.OldestAgeS)
		}
		state := "drained"
		if !g.Drained {
			state = fmt.Sprintf("NOT DRAINED: %d records behind, %s", g.Records, age)
		}
		parts = append(parts, g.Group+" "+state)
	}
	s := strings.Join(parts, "; ")
	if q.OutboxBacklog > 0 {
		s += fmt.Sprintf("; outbox backlog %d", q.OutboxBacklog)
	}
	if len(q.Errors) > 0 {
		s += "; monitor errors: " + strings.Join(q.Errors, ", ")
	}
	return s
}

// queueLagAtEnd reads the queue lag once (targets.LabDriver.QueueLag).
func (r *runner) queueLagAtEnd(ctx context.Context, sum *Summary) {
	end := &QueueLagEnd{}
	sum.QueueLag = end
	if r.lab == nil {
		end.Unknown = "the " + r.drv.Name() + " driver reads no queue lag"
		return
	}
	q, err := r.lab.QueueLag(ctx)
	var te *targets.Error
	switch {
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
		gl := GroupLag{Group: g, Records: q.Records[g], Drained: q.Records[g] == 0 && q.UnknownAge[g] == 0}
		if a, ok := q.MaxAgeSeconds[g]; ok && q.UnknownAge[g] == 0 {
			gl.OldestAgeS = &a
		}
		end.Groups = append(end.Groups, gl)
	}
}

// inboxTierPoll is how often waitInboxTier reads the queue lag.
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

// waitInboxTier waits, until deadline, for everything on its way to an
// inbox to arrive there: a message the server has ACKed but still holds in
// its queue or outbox is late, not lost, and a witness read before it
// arrives would call it lost. It returns "" once the tier has drained (or
// the target has no queue to wait for: no lab route, or no inbox group),
// else what was still behind at the deadline.
func (r *runner) waitInboxTier(ctx context.Context, deadline time.Time) string {
	for {
		if r.lab == nil {
			return "" // a driver without the lab's queue lag: nothing to wait for
		}
		q, err := r.lab.QueueLag(ctx)
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
