package capacity

import (
	"context"
	"net/http"
	"time"

	"imlab/capacity/lablag"
)

// Settle defaults and bound (Config.SettleMax, SettleLag).
const (
	DefaultSettleMax = 30 * time.Second
	DefaultSettleLag = 2 * time.Second
	MaxSettle        = 10 * time.Minute
)

// backlog is a consumer group's lag that did not drain before a step.
type backlog struct {
	group string
	age   float64
}

// settle waits, at most SettleMax, for every consumer group's lag age to
// fall to SettleLag, polling the lag route once a second. It returns the
// backlog still there when the wait ended, or nil: drained, no wait
// asked, or no lag route to ask (a target without it is not waited for).
func (s *search) settle(ctx context.Context) *backlog {
	c := s.cfg
	if c.SettleMax <= 0 {
		return nil
	}
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(c.SettleMax)
	said := false
	for {
		a, ok := lablag.Once(ctx, hc, c.Load.Target)
		if !ok {
			return nil
		}
		worst := oldest(a.MaxAge)
		if worst.age <= c.SettleLag.Seconds() {
			return nil
		}
		if time.Now().After(deadline) {
			s.progress("the backlog did not drain within %s: the next step starts with group %s %.1fs behind", c.SettleMax, worst.group, worst.age)
			return &worst
		}
		if !said {
			s.progress("waiting up to %s for the backlog to drain before the next step (group %s %.1fs behind)", c.SettleMax, worst.group, worst.age)
			said = true
		}
		select {
		case <-ctx.Done():
			return &worst
		case <-time.After(time.Second):
		}
	}
}

// oldest is the group with the largest lag age (ties by name).
func oldest(ages map[string]float64) backlog {
	var b backlog
	for g, a := range ages {
		if a > b.age || (a == b.age && (b.group == "" || g < b.group)) {
			b = backlog{group: g, age: a}
		}
	}
	return b
}
