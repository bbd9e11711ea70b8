package result

import (
	"fmt"
	"sort"

	"imlab/ref/server"
)

// DeadLetterSummary is what the dead-letter topic held at the end of the
// run and what became of each letter, read twice: from the server's lab
// route (GET /v1/lab/deadletters: what the server says it gave up, with
// its reasons) and from the topic itself with the lab's own Kafka client
// (the witness). The lab accounts for every record the pipeline failed to
// deliver through the queue: in the topic with its reason, repaired later
// (reported as a repair), or lost; never silently gone.
type DeadLetterSummary struct {
	// Known: the route and the topic were both read whole; false makes
	// every count a lower bound and fails every dead_letters check.
	Known  bool     `json:"known"`
	Errors []string `json:"errors,omitempty"`
	Topic  string   `json:"topic,omitempty"`
	// Records is the topic's size as the lab's client read it; Listed how
	// many letters the route listed.
	Records int64 `json:"records"`
	Listed  int   `json:"listed"`
	// By tier (the group that gave up) and by class (why).
	Inbox       int `json:"inbox"`
	History     int `json:"history"`
	Transient   int `json:"transient"`
	Permanent   int `json:"permanent"`
	Undecodable int `json:"undecodable"`
	// WindowMS is the server's transient window (ms); LabShortWindow says
	// the lab switch lowered it.
	WindowMS       int64 `json:"window_ms"`
	LabShortWindow bool  `json:"lab_short_window,omitempty"`
	// Early lists transient letters given up before their window had
	// passed (retried_ms < window_ms, or either unknown): the consumer's
	// promise to wait out a short outage broken.
	Early []DeadLetterRef `json:"early,omitempty"`
	// Mismatch says where the route and the topic disagree (a letter one
	// has and the other has not, or a different message at one place).
	Mismatch []string `json:"mismatch,omitempty"`
	// MsgIDs are the inbox tier's letters' messages (at most MaxListedIDs,
	// Truncated: more); Repaired of them were delivered in the end (the
	// checker's ledger), LostIDs were not: dead-lettered and still lost.
	MsgIDs    []uint64 `json:"msg_ids"`
	Truncated bool     `json:"truncated,omitempty"`
	Repaired  int      `json:"repaired"`
	LostIDs   []uint64 `json:"lost,omitempty"`
	// Queued is how many distinct messages the fan-out topic held at the
	// end (the lab's read). Unaccounted are messages the pipeline failed
	// to deliver through the queue — repaired by reconciliation, or lost
	// at the end — although their record was in the fan-out topic and is
	// in no dead letter: silently gone from the consumer's path.
	// NeverQueued counts those repaired or lost whose record was not in
	// the fan-out topic at the end: never published (a send-path matter: a
	// committed message whose publish failed, left to reconciliation), or
	// removed from the topic by a fault (a record loss).
	Queued      int      `json:"queued"`
	Unaccounted []uint64 `json:"unaccounted,omitempty"`
	NeverQueued int      `json:"never_queued"`
	// UnaccountedLost counts the Unaccounted the checker found lost (the
	// rest were repaired).
	UnaccountedLost int `json:"unaccounted_lost,omitempty"`
	// RemovedBy are the run's faults that removed records from the fan-out
	// topic (kafka_record_loss, kafka_topic_recreate), each with the
	// records it removed, consumed ones too: what took a NeverQueued
	// message's record out of the topic, unless its publish failed.
	RemovedBy []FaultEvent `json:"removed_by,omitempty"`
	// ReconcileGraceS is the reconciler's grace (s; 0: not judged) and
	// InboxPeakAgeS the inbox group's largest lag age over the run's
	// samples (s; -1: never measured). InboxBehind says the age came
	// within one sample interval of the grace (or was never measured):
	// reconciliation could then repair messages whose records the
	// consumer had not reached yet, which the lab cannot tell from
	// records the consumer skipped.
	ReconcileGraceS float64 `json:"reconcile_grace_s,omitempty"`
	InboxPeakAgeS   float64 `json:"inbox_peak_age_s,omitempty"`
	InboxBehind     bool    `json:"inbox_behind,omitempty"`
}

// DeadLetterRef names one letter.
type DeadLetterRef struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	MsgID     uint64 `json:"msg_id,omitempty"`
	RetriedMS int64  `json:"retried_ms"`
	WindowMS  int64  `json:"window_ms"`
}

// TopicLetter is one record of the dead-letter topic as the lab's own
// client read it: its place, the message its value names (0: not a
// message) and the headers the consumer wrote.
type TopicLetter struct {
	Partition int32
	Offset    int64
	MsgID     uint64
	Group     string
	Class     string
	RetriedMS int64 // -1 unknown
	WindowMS  int64 // -1 unknown
}

// DeadLetterInput is what AccountDeadLetters judges.
type DeadLetterInput struct {
	// Route is the server's answer (nil: not read, RouteErr says why).
	Route    *server.DeadLettersAnswer
	RouteErr string
	// Topic is the lab's read of the topic (TopicErr: it failed).
	Topic        []TopicLetter
	TopicRecords int64
	TopicErr     string
	// Queued are the messages the fan-out topic held at the end (the lab's
	// read; QueuedErr: it failed, and nothing can be unaccounted).
	Queued    map[uint64]bool
	QueuedErr string
	// Repaired are the messages forward reconciliation wrote (the repairs
	// the processes reported); Lost the checker's lost messages; Ledger
	// false when the checker did not run (no fate, no unaccounted).
	Repaired []uint64
	Lost     []uint64
	Ledger   bool
	// Events are the run's fault events (those that removed fan-out
	// records are named in the account); Lag its lag samples and
	// ReconcileGraceS the reconciler's grace in seconds (0: no judgement
	// of the consumer's lag, a queued message repaired or lost is said
	// skipped).
	Events          []FaultEvent
	Lag             []LagSample
	ReconcileGraceS float64
}

// Dead-letter classes and tiers as the reference server names them.
const (
	dlqTransient   = "transient"
	dlqPermanent   = "permanent"
	dlqUndecodable = "undecodable"
)

// AccountDeadLetters cross-checks the route with the topic and accounts
// for every letter and every message that left the queue's path.
func AccountDeadLetters(in DeadLetterInput) DeadLetterSummary {
	s := DeadLetterSummary{Known: in.Route != nil && in.RouteErr == "" && in.TopicErr == "", MsgIDs: []uint64{}}
	if in.RouteErr != "" {
		s.Errors = append(s.Errors, "route: "+in.RouteErr)
	}
	if in.TopicErr != "" {
		s.Errors = append(s.Errors, "topic: "+in.TopicErr)
	}
	if in.QueuedErr != "" {
		s.Known = false
		s.Errors = append(s.Errors, "fan-out topic: "+in.QueuedErr)
	}
	s.Queued = len(in.Queued)
	s.Records = in.TopicRecords
	s.RemovedBy = recordRemovals(in.Events)
	inboxGroup := ""
	if r := in.Route; r != nil {
		s.Topic, s.Listed, s.WindowMS, s.LabShortWindow, inboxGroup = r.Topic, len(r.Letters), r.TransientWindowMS, r.LabShortWindow, r.InboxGroup
		if r.Truncated {
			s.Known = false
			s.Errors = append(s.Errors, fmt.Sprintf("route: listed %d of %d letters", len(r.Letters), r.Records))
		}
		if in.TopicErr == "" {
			s.Mismatch = crossCheck(r.Letters, in.Topic)
		}
	}
	if int64(len(in.Topic)) != in.TopicRecords && in.TopicErr == "" {
		s.Known = false
		s.Errors = append(s.Errors, fmt.Sprintf("topic: read %d of %d records", len(in.Topic), in.TopicRecords))
	}
	inDLQ := map[uint64]bool{}
	for _, l := range in.Topic {
		switch {
		case inboxGroup != "" && l.Group == inboxGroup:
			s.Inbox++
			if l.MsgID != 0 && !inDLQ[l.MsgID] {
				inDLQ[l.MsgID] = true
				if len(s.MsgIDs) < MaxListedIDs {
					s.MsgIDs = append(s.MsgIDs, l.MsgID)
				} else {
					s.Truncated = true
				}
			}
		case in.Route != nil && l.Group == in.Route.HistoryGroup:
			s.History++
		}
		switch l.Class {
		case dlqTransient:
			s.Transient++
			if l.RetriedMS < 0 || l.WindowMS < 0 || l.RetriedMS < l.WindowMS {
				s.Early = append(s.Early, DeadLetterRef{Partition: l.Partition, Offset: l.Offset, MsgID: l.MsgID, RetriedMS: l.RetriedMS, WindowMS: l.WindowMS})
			}
		case dlqPermanent:
			s.Permanent++
		case dlqUndecodable:
			s.Undecodable++
		}
	}
	if !in.Ledger {
		return s
	}
	lost := map[uint64]bool{}
	for _, id := range in.Lost {
		lost[id] = true
	}
	for id := range inDLQ {
		if lost[id] {
			s.LostIDs = append(s.LostIDs, id)
		} else {
			s.Repaired++
		}
	}
	seen := map[uint64]bool{}
	for _, ids := range [][]uint64{in.Repaired, in.Lost} {
		for _, id := range ids {
			if inDLQ[id] || seen[id] {
				continue
			}
			seen[id] = true
			switch {
			case in.QueuedErr != "":
			case in.Queued[id]:
				s.Unaccounted = append(s.Unaccounted, id)
				if lost[id] {
					s.UnaccountedLost++
				}
			default:
				s.NeverQueued++
			}
		}
	}
	sortIDs(s.LostIDs)
	sortIDs(s.Unaccounted)
	if in.ReconcileGraceS > 0 {
		s.ReconcileGraceS = in.ReconcileGraceS
		s.InboxPeakAgeS, s.InboxBehind = inboxBehind(in.Lag, inboxGroup, in.ReconcileGraceS)
	}
	return s
}

func sortIDs(ids []uint64) { sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] }) }

// crossCheck compares the route's letters with the topic's records by
// place; at most 10 differences are described.
func crossCheck(route []server.DeadLetterAnswer, topic []TopicLetter) []string {
	type place struct {
		p int32
		o int64
	}
	byPlace := make(map[place]TopicLetter, len(topic))
	for _, l := range topic {
		byPlace[place{l.Partition, l.Offset}] = l
	}
	var out []string
	add := func(f string, a ...any) {
		if len(out) < 10 {
			out = append(out, fmt.Sprintf(f, a...))
		}
	}
	listed := make(map[place]bool, len(route))
	for _, r := range route {
		k := place{r.Partition, r.Offset}
		listed[k] = true
		l, ok := byPlace[k]
		switch {
		case !ok:
			add("the server lists a letter at %d/%d (msg_id %d) that the topic does not hold", r.Partition, r.Offset, r.MsgID)
		case l.MsgID != r.MsgID || l.Group != r.Group || l.Class != r.Class:
			add("at %d/%d the server lists msg_id %d (%s, %s), the topic holds msg_id %d (%s, %s)", r.Partition, r.Offset,
				r.MsgID, r.Group, r.Class, l.MsgID, l.Group, l.Class)
		}
	}
	for _, l := range topic {
		if !listed[place{l.Partition, l.Offset}] {
			add("the topic holds a letter at %d/%d (msg_id %d) that the server does not list", l.Partition, l.Offset, l.MsgID)
		}
	}
	return out
}

// Worth tells whether the summary has anything to say beside the verdict:
// letters, messages unaccounted for, or a read that failed.
func (s DeadLetterSummary) Worth() bool {
	return !s.Known || s.Records > 0 || len(s.Unaccounted) > 0 || s.NeverQueued > 0
}

// AccountLine says in one line what became of the dead letters ("" when
// the topic held none and nothing was repaired or lost).
func (s DeadLetterSummary) AccountLine() string {
	if !s.Known {
		return "dead letters not read whole: " + joinErrors(s.Errors)
	}
	line := fmt.Sprintf("%d in the dead-letter topic (inbox tier %d, history tier %d; transient %d, permanent %d, undecodable %d)",
		s.Records, s.Inbox, s.History, s.Transient, s.Permanent, s.Undecodable)
	line += fmt.Sprintf("; of the inbox tier's %d messages %d repaired later, %d still lost", len(s.MsgIDs), s.Repaired, len(s.LostIDs))
	line += s.unaccountedText() + s.neverQueuedText()
	if n := len(s.Early); n > 0 {
		line += fmt.Sprintf("; %d given up before their transient window", n)
	}
	return line
}

func joinErrors(es []string) string {
	if len(es) == 0 {
		return "no reason given"
	}
	out := es[0]
	for _, e := range es[1:] {
		out += "; " + e
	}
	return out
}
