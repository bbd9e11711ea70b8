package runner

import (
	"context"
	"time"

	"imlab/checker"
	"imlab/ref/server"
	"imlab/result"
	"imlab/runner/topics"
	"imlab/scenario"
)

// deadLetterTimeout bounds the end-of-run reads of the dead letters (the
// route and both topics).
const deadLetterTimeout = 30 * time.Second

// deadLetters reads the dead letters at the end of a run that used Kafka
// (the server's route on the first process with the api role, then the
// dead-letter and fan-out topics with the lab's own client) and accounts
// for them against the repairs and the checker's lost messages.
func (r *run) deadLetters(ctx context.Context, rep result.RepairSummary, v *checker.Verdict) *result.DeadLetterSummary {
	if r.kafka == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, deadLetterTimeout)
	defer cancel()
	in := result.DeadLetterInput{Repaired: rep.MsgIDs, Ledger: v != nil, Events: r.res.Events, Lag: r.res.Lag}
	// The grace the processes' reconciler was given (runner/proc): only
	// a message older than it is repaired.
	grace := scenario.DefaultReconcileGrace
	if g := r.f.Server.ReconcileGrace.D(); g > 0 {
		grace = g
	}
	in.ReconcileGraceS = grace.Seconds()
	if v != nil {
		for _, f := range v.Findings {
			if f.Name == checker.Lost {
				in.Lost = f.MsgIDs
			}
		}
	}
	addr := ""
	for _, s := range r.procs {
		if addr = s.APIAddr(); addr != "" {
			break
		}
	}
	if addr == "" {
		in.RouteErr = "no process with the api role is running"
	} else if a, err := topics.FetchDeadLetters(ctx, addr); err != nil {
		in.RouteErr = err.Error()
	} else {
		in.Route = &a
	}
	dlq, fan := server.DefaultConfig().Fanout.Topics.DLQ, r.topic
	if in.Route != nil {
		dlq, fan = in.Route.Topic, in.Route.FanoutTopic
	}
	var err error
	if in.Topic, in.TopicRecords, err = topics.ReadDeadLetterTopic(ctx, r.back.KafkaBrokers, dlq); err != nil {
		in.TopicErr = err.Error()
	}
	if in.Queued, err = topics.ReadQueued(ctx, r.back.KafkaBrokers, fan); err != nil {
		in.QueuedErr = err.Error()
	}
	s := result.AccountDeadLetters(in)
	return &s
}
