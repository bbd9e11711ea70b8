package tinodefake

import (
	"slices"
	"time"
)

// Reply is how the fake answers a publish whose seq it consumed without
// storing the message (HoleNext).
type Reply int

const (
	// ReplyError answers 500 "internal error".
	ReplyError Reply = iota
	// ReplyNone answers nothing (the client's outcome is unknown).
	ReplyNone
	// ReplyAck answers 202 with the consumed seq: an ACKed message that
	// was never stored.
	ReplyAck
)

// faults of one topic ("" in Server.faults: of every topic). Publishes
// consume them in the order of the fields.
type faults struct {
	drop      int // close the connection instead of answering
	dropStore bool
	hole      int // consume the seq, store nothing, no delete range
	holeReply Reply
	errStore  int // store and deliver, answer 500
	timeout   int // like errStore, and the counter is not advanced
	delayN    int // store and deliver, answer after delay
	delay     time.Duration
	dropDel   int // apply a {del}, leave its rows out of the delete log
}

func (s *Server) faultsLocked(topic string) *faults {
	f := s.faults[topic]
	if f == nil {
		f = &faults{}
		s.faults[topic] = f
	}
	return f
}

// dropDelFault consumes a pending DropDelLog of t (or of every topic) and
// reports whether the {del} being applied is left out of the log.
func (s *Server) dropDelFault(t *topic) bool {
	for _, id := range []string{t.id, ""} {
		if f := s.faults[id]; f != nil && f.dropDel > 0 {
			f.dropDel--
			return true
		}
	}
	return false
}

// pubFault applies the first pending fault of t (or of every topic) to a
// publish of msg; it reports whether the publish was handled.
func (s *Server) pubFault(ss *session, t *topic, id, name string, noEcho bool, msg *message) bool {
	f := s.faults[t.id]
	if f == nil || *f == (faults{}) {
		f = s.faults[""]
	}
	if f == nil {
		return false
	}
	switch {
	case f.drop > 0:
		f.drop--
		if f.dropStore {
			t.seq = msg.seq
			s.store(ss, t, msg, true)
		}
		ss.dropLocked()
	case f.hole > 0:
		f.hole--
		t.seq = msg.seq
		switch f.holeReply {
		case ReplyError:
			ss.sendLocked(ctrl(id, name, 500, "internal error", nil))
		case ReplyAck:
			ss.sendLocked(ctrl(id, name, 202, "accepted", map[string]int64{"seq": msg.seq}))
		}
	case f.errStore > 0:
		f.errStore--
		t.seq = msg.seq
		s.store(ss, t, msg, noEcho)
		ss.sendLocked(ctrl(id, name, 500, "internal error", nil))
	case f.timeout > 0:
		f.timeout--
		s.store(ss, t, msg, noEcho) // stored, but t.seq stays behind it
		ss.sendLocked(ctrl(id, name, 500, "internal error", nil))
	case f.delayN > 0:
		f.delayN--
		t.seq = msg.seq
		s.store(ss, t, msg, noEcho)
		s.laterLocked(ss, f.delay, ctrl(id, name, 202, "accepted", map[string]int64{"seq": msg.seq}))
	default:
		return false
	}
	return true
}

// laterLocked queues frame on ss after d.
func (s *Server) laterLocked(ss *session, d time.Duration, frame any) {
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.timers, t)
		if !s.closed {
			ss.sendLocked(frame)
		}
	})
	s.timers[t] = struct{}{}
}

// The fault knobs. topic is the fake's internal topic id: a group's name,
// or P2PID(a, b) for a p2p topic; "" means every topic that has no fault
// of its own.

// HoleNext makes the next n publishes consume a seq without storing the
// message or recording a delete: a permanent, unexplained hole. reply says
// what the publisher hears.
func (s *Server) HoleNext(topic string, n int, reply Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultsLocked(topic)
	f.hole, f.holeReply = n, reply
}

// ErrorButStore makes the next n publishes be stored and delivered, yet
// answered 500 "internal error".
func (s *Server) ErrorButStore(topic string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultsLocked(topic).errStore = n
}

// CommitTimeout makes the next publish be stored and delivered but
// answered 500, as if the insert committed after the server gave up on it,
// and leaves the topic's in-memory seq counter behind the stored message:
// every later publish collides with it and is refused with 500 until the
// topic is unloaded (Unload).
func (s *Server) CommitTimeout(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultsLocked(topic).timeout = 1
}

// DropOnPublish makes the next n publishes close the publisher's
// connection instead of being answered; stored says whether the message is
// stored (and delivered to the other sessions) first.
func (s *Server) DropOnPublish(topic string, n int, stored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultsLocked(topic)
	f.drop, f.dropStore = n, stored
}

// DelayAnswer makes the next n publishes be stored and delivered at once
// but answered only after d.
func (s *Server) DelayAnswer(topic string, n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultsLocked(topic)
	f.delayN, f.delay = n, d
}

// DropDelLog makes the next n deletes ({del} of messages, hard or soft)
// of topic be applied and answered ok, but left out of the delete log
// every member reads ({get what="del"}), as Tinode's range flattening
// swallows some ranges on the way out.
func (s *Server) DropDelLog(topic string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultsLocked(topic).dropDel = n
}

// Heal clears the pending faults of topic.
func (s *Server) Heal(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, topic)
}

// Unload evicts topic from memory as the server does when it goes idle:
// every attached session is detached and told so with an unsolicited
// {ctrl} 205 "evicted", and the seq counter is reloaded from storage (the
// highest stored or consumed seq), which ends a CommitTimeout refusal.
func (s *Server) Unload(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[topic]
	if t == nil {
		return
	}
	for seq := range t.msgs {
		t.seq = max(t.seq, seq)
	}
	for o := range s.sessions {
		if o.attached[t.id] && o.user != nil {
			delete(o.attached, t.id)
			o.sendLocked(ctrl("", t.name(o.user.id), 205, "evicted", nil))
		}
	}
}

// DropSessions closes every connection at once, as a server restart would.
func (s *Server) DropSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.sessions {
		ss.dropLocked()
	}
}

// TopicSeq is topic's seq counter (0 for an unknown topic).
func (s *Server) TopicSeq(topic string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[topic]; t != nil {
		return t.seq
	}
	return 0
}

// StoredSeqs lists the seqs stored in topic and not hard-deleted,
// ascending.
func (s *Server) StoredSeqs(topic string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[topic]
	if t == nil {
		return nil
	}
	var out []int64
	for seq, m := range t.msgs {
		if !m.hard {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out
}

// Sessions is the number of open connections.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}
