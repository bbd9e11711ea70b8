package checker

import (
	"fmt"
	"reflect"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/checker/conv"
	"imlab/checker/retention"
	"imlab/internal/chunked"
	"imlab/ledger"
)

// evidence is what the ledger says, read in one pass (ingest) and kept as
// the records said it: nothing here is judged. The model (model.go) is
// built from it once every record is in.
type evidence struct {
	version int
	shards  []ledger.ShardInfo
	// Population.
	devUID  map[uint32]uint64   // device -> its uid
	uidDevs map[uint64][]uint32 // uid -> its devices, in ledger order
	groups  map[uint64][]uint64 // group_id -> members
	// Sends.
	sends      map[uint64]send   // tick -> the send
	acks       map[uint64]ack    // msg_id -> the (last) ACK naming it
	ackByTick  map[uint64]uint64 // tick -> msg_id of its ACK
	unknown    map[uint64]send   // tick -> send of unknown outcome
	ackedTwice []ackedTwice      // ACK records naming one msg_id for two sends
	attempts   map[string]int    // ok / fail / unknown
	// Observations, in ledger order.
	deliveries chunked.List[ledger.Delivery]
	entries    chunked.List[inboxEntry] // pull and store witness entries
	claims     map[uint32]uint64        // device -> highest cursor it claimed
	probes     []ledger.Probe
	notes      []ledger.Note
	witnessN   int // pull witness entries
	storedN    int // store witness entries
	// Latencies measured at the send (response, service, send_delay).
	hist map[string]*hdr.Histogram
	// Version 3: the target, the conversation's records (package conv),
	// the server's retention (package retention).
	target      ledger.Capabilities
	targetSeen  bool                       // some shard's header stated the target
	targetClash string                     // shards stating different targets (a warning)
	cursors     map[uint32][]ledger.Cursor // device -> its cursor records, in order
	cv          conv.Evidence
	rt          retention.Evidence
	failed      map[uint64]send // tick -> send refused with a definite error (no earlier try of unknown outcome)
}

// send is what an attempt says about a send, whatever its outcome.
type send struct {
	dev      uint32
	convType uint8
	target   uint64
	outcome  ledger.Outcome
	tries    uint8
	status   uint16
	started  time.Duration
	conv     uint64 // the ACK's conversation, or the attempt's (0: not known)
}

// ack is what an ACKed attempt promised.
type ack struct {
	tick     uint64
	intended time.Duration
	ended    time.Duration
	dev      uint32
	conv     uint64
	convSeq  uint64
}

// ackedTwice is one msg_id ACKed for two sends.
type ackedTwice struct{ msg, first, second uint64 }

// inboxEntry is one entry of a witness; stored says which (the store
// witness, or the pull witness).
type inboxEntry struct {
	w      ledger.Witness
	stored bool
}

// src names the witness of an entry.
func (e *inboxEntry) src() string {
	if e.stored {
		return CheckStoreWitness
	}
	return CheckPullWitness
}

func newEvidence() *evidence {
	ev := &evidence{
		devUID: map[uint32]uint64{}, uidDevs: map[uint64][]uint32{}, groups: map[uint64][]uint64{},
		sends: map[uint64]send{}, acks: map[uint64]ack{}, ackByTick: map[uint64]uint64{}, unknown: map[uint64]send{},
		attempts: map[string]int{"ok": 0, "fail": 0, "unknown": 0}, claims: map[uint32]uint64{},
		hist: map[string]*hdr.Histogram{}, target: ledger.DefaultCapabilities(), cursors: map[uint32][]ledger.Cursor{},
		failed: map[uint64]send{},
	}
	for _, n := range []string{"response", "service", "send_delay"} {
		ev.hist[n] = newLatencyHist()
	}
	return ev
}

// ingest takes one record (the Record is reused by the reader: copy what
// is kept); the conversation's are package conv's, retention's package
// retention's (first: it also notes devices known from others' records).
func (ev *evidence) ingest(r *ledger.Record) {
	if ev.rt.Ingest(r) || ev.cv.Ingest(r) {
		return
	}
	switch r.Kind {
	case ledger.KindDevice:
		ev.devUID[r.Device.Dev] = r.Device.UID
		ev.uidDevs[r.Device.UID] = append(ev.uidDevs[r.Device.UID], r.Device.Dev)
	case ledger.KindGroup:
		ev.groups[r.Group.GroupID] = append([]uint64(nil), r.Group.Members...)
	case ledger.KindAttempt:
		ev.attempt(r.Attempt)
	case ledger.KindDelivery:
		ev.deliveries.Add(r.Delivery)
	case ledger.KindCursor:
		ev.cursors[r.Cursor.Dev] = append(ev.cursors[r.Cursor.Dev], r.Cursor)
		if r.Cursor.Status == ledger.Accepted || r.Cursor.Status == ledger.Sent {
			if c, ok := ev.claims[r.Cursor.Dev]; !ok || r.Cursor.Seq > c {
				ev.claims[r.Cursor.Dev] = r.Cursor.Seq
			}
		}
	case ledger.KindWitness:
		ev.witnessN++
		ev.entries.Add(inboxEntry{w: r.Witness})
	case ledger.KindStored:
		ev.storedN++
		ev.entries.Add(inboxEntry{w: r.Witness, stored: true})
	case ledger.KindProbe:
		ev.probes = append(ev.probes, r.Probe)
	case ledger.KindNote:
		ev.notes = append(ev.notes, r.Note)
	}
}

// header takes a shard's header: the target it states (the first one
// stated wins; the reference when none is).
func (ev *evidence) header(h ledger.Header) {
	switch {
	case h.Target == nil:
	case !ev.targetSeen:
		ev.target, ev.targetSeen = *h.Target, true
	case !reflect.DeepEqual(*h.Target, ev.target) && ev.targetClash == "":
		ev.targetClash = fmt.Sprintf("shard %d of run %s states target %+v, another %+v: judged as the first", h.Shard, h.RunID, *h.Target, ev.target)
	}
}

func (ev *evidence) attempt(a ledger.Attempt) {
	ev.attempts[a.Outcome.String()]++
	s := send{dev: a.Dev, convType: a.ConvType, target: a.Target, outcome: a.Outcome, tries: a.Tries, status: a.Status, started: a.Started, conv: a.ConvID}
	ev.sends[a.Tick] = s
	switch a.Outcome {
	case ledger.OK:
		if prev, ok := ev.acks[a.MsgID]; ok && prev.tick != a.Tick {
			ev.ackedTwice = append(ev.ackedTwice, ackedTwice{a.MsgID, prev.tick, a.Tick})
		}
		ev.acks[a.MsgID] = ack{tick: a.Tick, intended: a.Intended, ended: a.Ended, dev: a.Dev, conv: a.ConvID, convSeq: a.ConvSeq}
		ev.ackByTick[a.Tick] = a.MsgID
		ev.hist["response"].RecordValue(us(a.Ended - a.Intended))
		ev.hist["service"].RecordValue(us(a.Ended - a.Started))
	case ledger.Unknown:
		ev.unknown[a.Tick] = s
	case ledger.Fail:
		// A refusal after a try of unknown outcome does not say that
		// nothing happened: such a send is of unknown outcome too.
		if a.TriedUnknown {
			ev.unknown[a.Tick] = s
		} else if a.Tries > 0 {
			ev.failed[a.Tick] = s
		}
	}
	ev.hist["send_delay"].RecordValue(us(a.Started - a.Intended))
}

// recipients lists the uids a send is addressed to.
func (ev *evidence) recipients(s send) []uint64 {
	if s.convType == 1 {
		return []uint64{ev.devUID[s.dev], s.target}
	}
	return ev.groups[s.target]
}

func us(d time.Duration) int64 {
	v := d.Microseconds()
	if v < 1 {
		return 1
	}
	return v
}
