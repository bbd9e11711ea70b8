package server

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"imlab/ref/fanout"
	"imlab/ref/inbox"
	"imlab/ref/model"
)

// DeadLettersPath lists the records of the dead-letter topic with the
// reason each was given up and whether it was repaired since: the lab
// accounts for every dead-lettered record (in the topic with its reason,
// repaired later, or lost). A lab route (Config.LabRoutes; off outside the
// lab, like /v1/lab/history), open like RepairsPath (no token; ids,
// reasons and counts, no content), on the api role.
const DeadLettersPath = "/v1/lab/deadletters"

// deadLettersTimeout bounds one answer of DeadLettersPath (the topic read
// and the inbox lookups).
const deadLettersTimeout = 10 * time.Second

// DeadLettersAnswer is DeadLettersPath's answer.
type DeadLettersAnswer struct {
	Topic string `json:"topic"`
	// FanoutTopic is the topic the letters' records came from.
	FanoutTopic string `json:"fanout_topic"`
	// InboxGroup and HistoryGroup name the tiers' groups (a letter's
	// group says which tier gave it up).
	InboxGroup   string `json:"inbox_group"`
	HistoryGroup string `json:"history_group"`
	// TransientWindowMS is this process's consumers' transient window and
	// LabShortWindow whether the lab switch lowered it below
	// fanout.MinTransientWindow.
	TransientWindowMS int64 `json:"transient_window_ms"`
	LabShortWindow    bool  `json:"lab_short_window"`
	// Records is the topic's size; Letters the first
	// fanout.MaxDeadLettersRead records (Truncated: more were there).
	Records   int64              `json:"records"`
	Truncated bool               `json:"truncated"`
	Letters   []DeadLetterAnswer `json:"letters"`
	// Repaired counts the inbox tier's letters whose message is now in
	// every recipient's inbox.
	Repaired int `json:"repaired"`
}

// DeadLetterAnswer is one dead letter. Ids also as strings of their digits
// (they pass 2^53). Attempts, RetriedMS and WindowMS are -1 when unknown.
// Repaired: for the inbox tier's letters, whether every recipient's inbox
// holds the message now (written after it was given up: by reconciliation,
// a replay or a republish); absent (not judged) for other tiers and for a
// record that is not a message.
type DeadLetterAnswer struct {
	Partition       int32  `json:"partition"`
	Offset          int64  `json:"offset"`
	Group           string `json:"group"`
	Tier            string `json:"tier"`
	Reason          string `json:"reason"`
	Class           string `json:"class"`
	Attempts        int    `json:"attempts"`
	RetriedMS       int64  `json:"retried_ms"`
	WindowMS        int64  `json:"window_ms"`
	SourcePartition int32  `json:"source_partition"`
	SourceOffset    int64  `json:"source_offset"`
	MsgID           uint64 `json:"msg_id,omitempty"`
	MsgIDStr        string `json:"msg_id_str,omitempty"`
	ConvID          uint64 `json:"conv_id,omitempty"`
	ConvIDStr       string `json:"conv_id_str,omitempty"`
	ConvSeq         uint64 `json:"conv_seq,omitempty"`
	Repaired        *bool  `json:"repaired,omitempty"`
}

// DeadLetters reads the dead-letter topic and judges each inbox-tier
// letter repaired or not.
func (p *Process) DeadLetters(ctx context.Context) (DeadLettersAnswer, error) {
	cfg := p.Cfg.Fanout
	a := DeadLettersAnswer{Topic: cfg.Topics.DLQ, FanoutTopic: cfg.Topics.Fanout, InboxGroup: cfg.Consumer.Group, HistoryGroup: cfg.HistoryGroup,
		TransientWindowMS: cfg.Consumer.TransientWindow.Milliseconds(), LabShortWindow: cfg.Consumer.LabShortWindow,
		Letters: []DeadLetterAnswer{}}
	if len(p.Backends.KafkaBrokers) == 0 {
		return a, fmt.Errorf("%w: this process has no Kafka brokers: no dead-letter topic", model.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, deadLettersTimeout)
	defer cancel()
	read, err := fanout.ReadDeadLetters(ctx, p.Backends.KafkaBrokers, cfg.Topics.DLQ)
	if err != nil {
		return a, fmt.Errorf("%w: %w", model.ErrUnavailable, err)
	}
	a.Records, a.Truncated = read.Records, read.Truncated
	var keys []inbox.Key
	rcpts := make([][]uint64, len(read.Letters))
	for i, dl := range read.Letters {
		la := DeadLetterAnswer{Partition: dl.Partition, Offset: dl.Offset, Group: dl.Group, Reason: dl.Reason, Class: dl.Class,
			Attempts: dl.Attempts, RetriedMS: dl.RetriedMS, WindowMS: dl.WindowMS,
			SourcePartition: dl.SourcePartition, SourceOffset: dl.SourceOffset}
		switch dl.Group {
		case cfg.Consumer.Group:
			la.Tier = "inbox"
		case cfg.HistoryGroup:
			la.Tier = "history"
		}
		if dl.Decoded {
			e := dl.Event
			la.MsgID, la.MsgIDStr, la.ConvID, la.ConvIDStr, la.ConvSeq = e.MsgID, strconv.FormatUint(e.MsgID, 10),
				e.ConvID, strconv.FormatUint(e.ConvID, 10), e.ConvSeq
			if la.Tier == "inbox" {
				rs, err := p.deadLetterRecipients(ctx, e.ConvID)
				if err != nil {
					return a, fmt.Errorf("%w: recipients of dead letter %d/%d: %w", model.ErrUnavailable, dl.Partition, dl.Offset, err)
				}
				rcpts[i] = rs
				for _, uid := range rs {
					keys = append(keys, inbox.Key{UID: uid, MsgID: e.MsgID})
				}
			}
		}
		a.Letters = append(a.Letters, la)
	}
	if len(keys) == 0 {
		return a, nil
	}
	have, err := inbox.Delivered(ctx, p.DB, keys)
	if err != nil {
		return a, fmt.Errorf("%w: dead letters' inbox rows: %w", model.ErrUnavailable, err)
	}
	for i := range a.Letters {
		if rcpts[i] == nil {
			continue
		}
		ok := true
		for _, uid := range rcpts[i] {
			ok = ok && have[inbox.Key{UID: uid, MsgID: a.Letters[i].MsgID}]
		}
		a.Letters[i].Repaired = &ok
		if ok {
			a.Repaired++
		}
	}
	return a, nil
}

// deadLetterRecipients lists a conversation's recipients (a group's
// members now).
func (p *Process) deadLetterRecipients(ctx context.Context, convID uint64) ([]uint64, error) {
	t, a, _, err := model.ParseConvID(convID)
	if err != nil {
		return nil, err
	}
	var members []uint64
	if t == model.ConvGroup {
		if members, err = p.members(ctx, a); err != nil {
			return nil, err
		}
	}
	return fanout.Recipients(convID, members)
}

func (p *Process) deadLettersAnswer(ctx context.Context) (any, error) { return p.DeadLetters(ctx) }

// LabTransientWindow sets cfg's consumers' transient window to d (LAB
// ONLY: fanout.ConsumerConfig.LabShortWindow), allowed down to
// fanout.MinLabTransientWindow, so that a scenario can keep a backend down
// past it. The error names the setting.
func LabTransientWindow(cfg *Config, d time.Duration) error {
	c := cfg.Fanout.Consumer
	c.LabShortWindow, c.TransientWindow = true, d
	if err := c.ValidateWindow(); err != nil {
		return err
	}
	cfg.Fanout.Consumer = c
	return nil
}
