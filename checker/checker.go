// Package checker reads a run's ledger and says, in Jepsen's vocabulary,
// whether the server kept its promises. It owns the definitions below and
// nothing else: it does no I/O beyond reading the ledger and never talks to
// the server.
//
// The model: a per-uid inbox is a log, (uid, seq) -> one message, each
// message at most once; a conversation is ordered by conv_seq, and every
// inbox shows a conversation's messages in conv_seq order; an ACK is a
// promise that the message reaches every recipient's inbox, stored as the
// ACK says (conv_id, conv_seq), with what the ack policy promises already
// stored at the ACK.
//
// Evidence (a "device" is one (uid, did) of the population; a message's
// recipients are both parties of a 1:1 conversation, sender included, or
// every member of the group; a recipient device is every device of a
// recipient uid):
//   - attempts and their outcomes (ok = ACKed, fail, unknown);
//   - deliveries: what each device stored, by push or pull, in order;
//   - cursors each device claimed;
//   - the pull witness: a full sync/pull of each uid from seq 0 after the
//     final drain by a device outside the population (it may be served from
//     the hot cache);
//   - the store witness: every uid's inbox read from the store of record
//     (MySQL, the lab route, bypassing every cache) after the final drain;
//   - read-after-ACK probes: right after some ACKs, the store read for the
//     sender (and recipients) through the lab route;
//   - notes saying which of the last three could be gathered, and the
//     server's ack policy.
//
// Findings (each is one small function in findings.go):
//
//   - ok: an ACKed message that every recipient device stored at least once.
//   - lost: an ACKed message (or a recovered one, below) that some recipient
//     device never stored, after the final drain. Listed per message; the
//     (message, device) pairs are counted too.
//   - duplicated: a device stored the same (msg_id, seq) more than once.
//     Counted, allowed. A second msg_id for the same send (same
//     client_msg_id, read from the content) is not a duplicate but an
//     unexpected message, and one msg_id at two seqs is double-stored.
//   - unexpected: a stored (or witnessed) msg_id that no ACK names and that
//     no send of unknown outcome explains; or a message stored by a device
//     (or held in the inbox of a uid) that is not one of its recipients; or
//     a second msg_id for one send (a retry stored twice).
//   - recovered: a send whose outcome was unknown (timeout, 5xx, connection
//     lost) whose message was stored by some device or witness anyway. Not
//     an anomaly.
//   - reordered: within one device and one conversation, after dropping
//     repeated msg_ids, the conv_seq of the messages in the order the device
//     stored them does not strictly increase; or, within one witnessed
//     inbox (pull or store witness) and one conversation, conv_seq does not
//     strictly increase in seq order.
//   - skipped: a device claimed cursor C (an ack the server accepted, or an
//     ack frame sent on the WebSocket) while the uid's inbox holds a message
//     at seq ≤ C that this device never stored. The inbox is known from the
//     witnesses together with every (seq, msg_id) any device of that uid
//     stored, so an entry overwritten after some device saw it still counts.
//   - lost-in-store: an ACKed (or recovered) message missing from the stored
//     inbox of one of its recipient uids, whatever devices got by push or
//     from a cache. Listed per message; (message, uid) pairs counted. Judged
//     only for uids whose store witness was read whole.
//   - unstored-at-ack: a read-after-ACK probe found the store without what
//     the server's ack policy promises at the ACK: strict, the probed uid's
//     inbox row and the msg_content row; store, msg_content; outbox,
//     msg_content and (the mq_outbox row, or the probed uid's inbox row once
//     a consumer has confirmed and the relay removed the outbox row); queue
//     promises nothing stored, so nothing is probed against it.
//   - double-stored: one msg_id at two seqs of one uid's inbox (what
//     uk_uid_msg forbids), seen in any observation: deliveries, pull
//     witness, store witness. Not a duplicate delivery.
//   - seq-conflict: one (uid, seq) seen holding two msg_ids across all
//     observations (a reused seq).
//   - ack-mismatch: a delivery or witnessed entry of an ACKed msg_id whose
//     conv_id or conv_seq differs from the ACK's.
//
// A run is valid iff every deciding finding is 0: all but duplicated and
// recovered decide (Deciding). Verdict.Judge re-decides with allowances
// (e.g. a scenario that names a degraded window allows some reordered).
//
// Followed messages (Options.Follow: msg_ids named from outside the
// ledger, e.g. the ones forward reconciliation repaired) are each, by the
// definitions above, delivered (ACKed or recovered, stored by every
// recipient device in the end, however late), lost (in the lost finding)
// or unexplained (no ACK and no send of unknown outcome names them);
// Verdict.Followed counts them and says how late the delivered ACKed ones
// reached their last recipient device. Following decides nothing.
//
// A check whose evidence is absent is named, never silently passed:
// Verdict.Checks says for the pull witness, the store witness and
// read-after-ACK whether the check was made, partly made, or not made and
// why (an older ledger, the lab route answering 404, errors). An older
// ledger is judged with what it has.
package checker

import (
	"fmt"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/ledger"
)

// MaxListed bounds how many msg_ids a finding lists in the text table and
// how many examples it keeps; the JSON verdict lists every msg_id.
const MaxListed = 10

// Finding names.
const (
	Lost          = "lost"
	Duplicated    = "duplicated"
	Unexpected    = "unexpected"
	Recovered     = "recovered"
	Reordered     = "reordered"
	Skipped       = "skipped"
	LostInStore   = "lost-in-store"
	UnstoredAtAck = "unstored-at-ack"
	DoubleStored  = "double-stored"
	SeqConflict   = "seq-conflict"
	AckMismatch   = "ack-mismatch"
)

// Names of the findings, in table order.
var Names = []string{Lost, Duplicated, Unexpected, Recovered, Reordered, Skipped,
	LostInStore, UnstoredAtAck, DoubleStored, SeqConflict, AckMismatch}

// Deciding are the findings that make a run invalid (unless allowed, see
// Verdict.Judge).
var Deciding = []string{Lost, Unexpected, Reordered, Skipped, LostInStore, UnstoredAtAck, DoubleStored, SeqConflict, AckMismatch}

// Check names (Verdict.Checks).
const (
	CheckPullWitness  = "pull-witness"
	CheckStoreWitness = "store-witness"
	CheckReadAfterAck = "read-after-ack"
)

// Finding is one anomaly class.
type Finding struct {
	Name string `json:"name"`
	// Count is the number of distinct messages concerned (for duplicated:
	// extra copies; for lost, skipped and lost-in-store see Pairs).
	Count int `json:"count"`
	// Pairs counts (message, device) pairs for lost and skipped, (message,
	// uid) pairs for lost-in-store and unstored-at-ack.
	Pairs  int      `json:"pairs,omitempty"`
	MsgIDs []uint64 `json:"msg_ids"`
	// UIDs lists the uids concerned, for the store-level findings.
	UIDs []uint64 `json:"uids,omitempty"`
	// Decides: a count above Allowed makes the run invalid.
	Decides bool `json:"decides"`
	// Allowed is the count this finding may reach and still leave the run
	// valid (0 unless Judge was given an allowance).
	Allowed int `json:"allowed,omitempty"`
	// Examples explain a few entries in words.
	Examples []string `json:"examples,omitempty"`
}

// CheckResult says whether a piece of evidence was there to judge with.
type CheckResult struct {
	Name string `json:"name"`
	// Made: the evidence was gathered (Partial: for some uids or probes
	// only, Detail says which).
	Made    bool   `json:"made"`
	Partial bool   `json:"partial,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Findings are the findings this evidence feeds.
	Findings []string `json:"findings"`
}

// Latency quantiles in microseconds.
type Latency struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50_us"`
	P90   int64 `json:"p90_us"`
	P99   int64 `json:"p99_us"`
	P999  int64 `json:"p999_us"`
	Max   int64 `json:"max_us"`
}

// Verdict is the checker's answer.
type Verdict struct {
	Valid bool `json:"valid"`
	// LedgerVersion is the format version of the ledger judged.
	LedgerVersion int `json:"ledger_version"`
	// Policy is the server's ack policy as the lab route reported it ("":
	// unknown).
	Policy     string              `json:"policy,omitempty"`
	Devices    int                 `json:"devices"`
	Users      int                 `json:"users"`
	Groups     int                 `json:"groups"`
	Attempts   map[string]int      `json:"attempts"` // ok / fail / unknown
	Deliveries int                 `json:"deliveries"`
	Witnessed  int                 `json:"witnessed"`
	Stored     int                 `json:"stored"` // store witness entries
	Probes     int                 `json:"probes"` // read-after-ACK probes answered
	OK         int                 `json:"ok"`
	Findings   map[string]*Finding `json:"findings"`
	Checks     []CheckResult       `json:"checks"`
	Latency    map[string]Latency  `json:"latency"`
	Shards     []ShardNote         `json:"shards"`
	Warnings   []string            `json:"warnings,omitempty"`
	// Followed is what became of the messages Options.Follow named (nil
	// when none were named).
	Followed *Fate `json:"followed,omitempty"`
}

// Options of CheckSourcesWith.
type Options struct {
	// Follow names messages from outside the ledger, e.g. those forward
	// reconciliation repaired, whose fate the verdict reports in Followed.
	Follow []uint64
}

// Fate is what the ledger says became of a set of messages named from
// outside it, by the findings' definitions: each distinct msg_id is
// delivered, lost or unexplained.
type Fate struct {
	// Messages is the number of distinct msg_ids followed.
	Messages int `json:"messages"`
	// Delivered: ACKed (or recovered) and, after the final drain, stored
	// by every recipient device: not lost, whenever it arrived.
	Delivered int `json:"delivered"`
	// Lost: ACKed (or recovered) and never stored by some recipient
	// device; each is also in the lost finding.
	Lost []uint64 `json:"lost"`
	// Unexplained: no ACK and no send of unknown outcome names it, so the
	// ledger cannot say whom it was for.
	Unexplained []uint64 `json:"unexplained"`
	// LastCopy is, over the delivered messages that were ACKed, the time
	// from the intended send to the first copy of the last recipient
	// device to store it: how late they arrived (Count 0: none measured).
	LastCopy Latency `json:"last_copy"`
}

// ShardNote says how a shard file read.
type ShardNote struct {
	Path      string `json:"path"`
	Records   uint64 `json:"records"`
	Bytes     int64  `json:"bytes"`
	Truncated bool   `json:"truncated"`
}

// Judge re-decides Valid: a deciding finding counts against validity only
// beyond its allowance (allow[name]; absent: 0). Allowances for findings
// that do not decide, or that are unknown, are ignored and reported in the
// error. Check calls Judge(nil).
func (v *Verdict) Judge(allow map[string]int) error {
	var bad []string
	for n, a := range allow {
		if f, ok := v.Findings[n]; !ok || !f.Decides || a < 0 {
			bad = append(bad, n)
		}
	}
	v.Valid = true
	for _, n := range Deciding {
		f := v.Findings[n]
		if f == nil {
			continue
		}
		f.Allowed = max(allow[n], 0)
		if f.Count > f.Allowed {
			v.Valid = false
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("checker: allowances for %v: not deciding findings (or negative)", bad)
	}
	return nil
}

// Unmade names the checks that could not be made (Made false).
func (v *Verdict) Unmade() []string {
	var out []string
	for _, c := range v.Checks {
		if !c.Made {
			out = append(out, c.Name)
		}
	}
	return out
}

type ack struct {
	tick     uint64
	intended time.Duration
	ended    time.Duration
	dev      uint32
	conv     uint64
	convSeq  uint64
}

type sendInfo struct {
	dev      uint32
	convType uint8
	target   uint64
}

// witnessed is what the witnesses (pull and store) saw of one msg_id.
type witnessed struct {
	tick uint64   // the send its content names (0: none, or an older ledger)
	uids []uint64 // inboxes holding it
	src  []string // the witness of each uid entry
}

type devState struct {
	uid       uint64
	recv      map[uint64]uint64 // msg_id -> seq of its first copy
	lastConv  map[uint64]uint64 // conv_id -> last conv_seq (after dedupe)
	claimed   uint64
	hasClaim  bool
	firstSeen map[uint64]time.Duration
}

// inboxObs is everything seen of one uid's inbox, from every observation.
type inboxObs struct {
	seqOf map[uint64]uint64 // msg_id -> first seq seen
	at    map[uint64]uint64 // seq -> first msg_id seen
}

// entry is one witnessed inbox entry (order checks).
type entry struct{ seq, msgID, conv, convSeq uint64 }

// Check reads the ledger in dir and returns the verdict.
func Check(dir string) (*Verdict, error) { return CheckSources([]Source{{Dir: dir}}) }

// Source is one run directory to judge and the shift that puts its times on
// the common time base (0 for a single run).
type Source struct {
	Dir   string
	Shift time.Duration
}

// CheckSources judges the ledgers of several run directories (the segments
// of one split run) as one run: their records are read as if one
// generator had written them, each moved by its Shift, and the latency
// histograms are built from every record, never from the segments'
// percentiles.
func CheckSources(srcs []Source) (*Verdict, error) { return CheckSourcesWith(srcs, Options{}) }

// CheckSourcesWith is CheckSources, and reports in Verdict.Followed what
// became of the messages opts.Follow names.
func CheckSourcesWith(srcs []Source, opts Options) (*Verdict, error) {
	c := newCollector()
	var infos []ledger.ShardInfo
	for _, src := range srcs {
		in, err := ledger.ReadDir(src.Dir, func(_ int, r *ledger.Record) error { r.Shift(src.Shift); return c.add(r) })
		infos = append(infos, in...)
		if err != nil {
			return nil, err
		}
	}
	// Second pass: deliveries, now that every ACK and member is known.
	for _, src := range srcs {
		if _, err := ledger.ReadDir(src.Dir, func(_ int, r *ledger.Record) error {
			if r.Kind == ledger.KindDelivery {
				r.Shift(src.Shift)
				c.delivery(&r.Delivery)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, in := range infos {
		c.version = max(c.version, in.Header.Version)
	}
	v := c.verdict()
	if len(opts.Follow) > 0 {
		v.Followed = c.fate(opts.Follow)
	}
	for _, in := range infos {
		v.Shards = append(v.Shards, ShardNote{Path: in.Path, Records: in.Records, Bytes: in.Bytes, Truncated: in.Truncated})
		if in.Truncated {
			v.Warnings = append(v.Warnings, fmt.Sprintf("%s is truncated (the run did not close it): read %d records", in.Path, in.Records))
		}
	}
	return v, nil
}

type collector struct {
	version   int
	devices   map[uint32]*devState
	uidDevs   map[uint64][]uint32
	groups    map[uint64][]uint64
	acks      map[uint64]ack             // msg_id -> ack
	ackByTick map[uint64]uint64          // tick -> msg_id
	unknown   map[uint64]sendInfo        // tick -> send of unknown outcome
	sends     map[uint64]sendInfo        // tick -> every send
	recovered map[uint64]uint64          // msg_id -> tick
	recTick   map[uint64]uint64          // tick -> recovered msg_id
	inbox     map[uint64]*inboxObs       // uid -> every observation
	witnessed map[uint64]*witnessed      // msg_ids seen by a witness
	wEntries  map[uint64][]entry         // uid -> pull witness entries
	sEntries  map[uint64][]entry         // uid -> store witness entries
	stored    map[uint64]map[uint64]bool // uid -> msg_ids in the stored inbox
	probes    []ledger.Probe
	notes     []ledger.Note
	attempts  map[string]int
	deliv     int
	witness   int
	storeN    int
	f         map[string]*Finding
	sets      map[string]map[uint64]bool // finding -> msg_ids
	uidSets   map[string]map[uint64]bool // finding -> uids
	hist      map[string]*hdr.Histogram
}

func newCollector() *collector {
	c := &collector{
		devices: map[uint32]*devState{}, uidDevs: map[uint64][]uint32{}, groups: map[uint64][]uint64{},
		acks: map[uint64]ack{}, ackByTick: map[uint64]uint64{}, unknown: map[uint64]sendInfo{}, sends: map[uint64]sendInfo{},
		recovered: map[uint64]uint64{}, recTick: map[uint64]uint64{}, inbox: map[uint64]*inboxObs{},
		witnessed: map[uint64]*witnessed{}, wEntries: map[uint64][]entry{}, sEntries: map[uint64][]entry{},
		stored: map[uint64]map[uint64]bool{}, attempts: map[string]int{"ok": 0, "fail": 0, "unknown": 0},
		f: map[string]*Finding{}, sets: map[string]map[uint64]bool{}, uidSets: map[string]map[uint64]bool{},
		hist: map[string]*hdr.Histogram{},
	}
	for _, n := range Names {
		c.f[n] = &Finding{Name: n, MsgIDs: []uint64{}}
		c.sets[n] = map[uint64]bool{}
		c.uidSets[n] = map[uint64]bool{}
	}
	for _, n := range Deciding {
		c.f[n].Decides = true
	}
	for _, n := range []string{"response", "service", "send_delay", "end_to_end"} {
		c.hist[n] = newLatencyHist()
	}
	return c
}

// mark puts msg_id m into finding name (and uid u, when not 0) and keeps
// an example the first time m is marked.
func (c *collector) mark(name string, m, u uint64, format string, args ...any) {
	if u != 0 {
		c.uidSets[name][u] = true
	}
	if c.sets[name][m] {
		return
	}
	c.sets[name][m] = true
	c.example(name, format, args...)
}

func (c *collector) example(name, format string, args ...any) {
	f := c.f[name]
	if len(f.Examples) < MaxListed {
		f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
	}
}

func us(d time.Duration) int64 {
	v := d.Microseconds()
	if v < 1 {
		return 1
	}
	return v
}

func (c *collector) dev(id uint32) *devState {
	d := c.devices[id]
	if d == nil {
		d = &devState{recv: map[uint64]uint64{}, lastConv: map[uint64]uint64{}, firstSeen: map[uint64]time.Duration{}}
		c.devices[id] = d
	}
	return d
}

func (c *collector) add(r *ledger.Record) error {
	switch r.Kind {
	case ledger.KindDevice:
		d := c.dev(r.Device.Dev)
		d.uid = r.Device.UID
		c.uidDevs[r.Device.UID] = append(c.uidDevs[r.Device.UID], r.Device.Dev)
	case ledger.KindGroup:
		c.groups[r.Group.GroupID] = append([]uint64(nil), r.Group.Members...)
	case ledger.KindAttempt:
		c.attempt(r.Attempt)
	case ledger.KindDelivery:
		c.deliv++ // judged in the second pass, once every ACK is known
	case ledger.KindCursor:
		if r.Cursor.Status == ledger.Accepted || r.Cursor.Status == ledger.Sent {
			d := c.dev(r.Cursor.Dev)
			if !d.hasClaim || r.Cursor.Seq > d.claimed {
				d.claimed, d.hasClaim = r.Cursor.Seq, true
			}
		}
	case ledger.KindWitness:
		c.witness++
		c.witnessEntry(r.Witness, CheckPullWitness)
		w := r.Witness
		c.wEntries[w.UID] = append(c.wEntries[w.UID], entry{w.Seq, w.MsgID, w.ConvID, w.ConvSeq})
	case ledger.KindStored:
		c.storeN++
		c.witnessEntry(r.Witness, CheckStoreWitness)
		w := r.Witness
		c.sEntries[w.UID] = append(c.sEntries[w.UID], entry{w.Seq, w.MsgID, w.ConvID, w.ConvSeq})
		if c.stored[w.UID] == nil {
			c.stored[w.UID] = map[uint64]bool{}
		}
		c.stored[w.UID][w.MsgID] = true
	case ledger.KindProbe:
		c.probes = append(c.probes, r.Probe)
	case ledger.KindNote:
		c.notes = append(c.notes, r.Note)
	}
	return nil
}

func (c *collector) attempt(a ledger.Attempt) {
	c.attempts[a.Outcome.String()]++
	si := sendInfo{dev: a.Dev, convType: a.ConvType, target: a.Target}
	c.sends[a.Tick] = si
	switch a.Outcome {
	case ledger.OK:
		if prev, ok := c.acks[a.MsgID]; ok && prev.tick != a.Tick {
			c.mark(Unexpected, a.MsgID, 0, "msg_id %d ACKed for two sends (ticks %d and %d)", a.MsgID, prev.tick, a.Tick)
		}
		c.acks[a.MsgID] = ack{tick: a.Tick, intended: a.Intended, ended: a.Ended, dev: a.Dev, conv: a.ConvID, convSeq: a.ConvSeq}
		c.ackByTick[a.Tick] = a.MsgID
		c.hist["response"].RecordValue(us(a.Ended - a.Intended))
		c.hist["service"].RecordValue(us(a.Ended - a.Started))
	case ledger.Unknown:
		c.unknown[a.Tick] = si
	}
	c.hist["send_delay"].RecordValue(us(a.Started - a.Intended))
}

// witnessEntry takes one entry of a witness (src: which one).
func (c *collector) witnessEntry(w ledger.Witness, src string) {
	c.observe(w.UID, w.Seq, w.MsgID, src, w.UID)
	c.ackMismatch(w.MsgID, w.ConvID, w.ConvSeq, src+" of uid", w.UID)
	x := c.witnessed[w.MsgID]
	if x == nil {
		x = &witnessed{}
		c.witnessed[w.MsgID] = x
	}
	if w.Tick != 0 {
		x.tick = w.Tick
	}
	x.uids = append(x.uids, w.UID)
	x.src = append(x.src, src)
}

// recipients lists the uids a send is addressed to.
func (c *collector) recipients(s sendInfo) []uint64 {
	sender := c.devices[s.dev]
	var su uint64
	if sender != nil {
		su = sender.uid
	}
	if s.convType == 1 {
		return []uint64{su, s.target}
	}
	return c.groups[s.target]
}

func contains(xs []uint64, x uint64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
