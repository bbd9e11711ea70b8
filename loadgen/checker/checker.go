// Package checker reads a run's ledger and says, in Jepsen's vocabulary,
// whether the server kept its promises. It owns the definitions below and
// nothing else: it does no I/O beyond reading the ledger and never talks to
// the server.
//
// Definitions (a "device" is one (uid, did) of the population; a message's
// recipients are both parties of a 1:1 conversation, sender included, or
// every member of the group; a recipient device is every device of a
// recipient uid):
//
//   - ok: an ACKed message that every recipient device stored at least once.
//   - lost: an ACKed message (or a recovered one, below) that some recipient
//     device never stored, after the final drain. Listed per message; the
//     (message, device) pairs are counted too.
//   - duplicated: a device stored the same msg_id more than once. Counted,
//     allowed. Duplicates are recognised by msg_id only: a second msg_id for
//     the same send (same client_msg_id, read from the content) is not a
//     duplicate but an unexpected message.
//   - unexpected: a stored (or witnessed) msg_id that no ACK names and that
//     no send of unknown outcome explains; or a message stored by a device
//     whose uid is not one of its recipients; or a second msg_id for one send.
//   - recovered: a send whose outcome was unknown (timeout, 5xx, connection
//     lost) whose message was stored by some device anyway. Not an anomaly.
//   - reordered: within one device and one conversation, after dropping
//     repeated msg_ids, the conv_seq of the messages in the order the device
//     stored them does not strictly increase.
//   - skipped: a device claimed cursor C (an ack the server accepted, or an
//     ack frame sent on the WebSocket) while the uid's inbox holds a message
//     at seq ≤ C that this device never stored. The inbox is known from the
//     witness pulls (a full pull of each uid from seq 0 after the final
//     drain, by a device outside the population) together with every
//     (seq, msg_id) any device of that uid stored, so an entry overwritten
//     after some device saw it still counts.
//
// A run is valid iff lost = unexpected = skipped = 0.
package checker

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/loadgen/ledger"
)

// MaxListed bounds how many msg_ids a finding lists in the text table; the
// JSON verdict lists them all.
const MaxListed = 10

// Finding is one anomaly class.
type Finding struct {
	Name string `json:"name"`
	// Count is the number of distinct messages concerned (for duplicated:
	// extra copies; for lost and skipped see Pairs).
	Count int `json:"count"`
	// Pairs counts (message, device) pairs for lost and skipped.
	Pairs  int      `json:"pairs,omitempty"`
	MsgIDs []uint64 `json:"msg_ids"`
	// Examples explain a few entries in words.
	Examples []string `json:"examples,omitempty"`
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
	Valid      bool                `json:"valid"`
	Devices    int                 `json:"devices"`
	Users      int                 `json:"users"`
	Groups     int                 `json:"groups"`
	Attempts   map[string]int      `json:"attempts"` // ok / fail / unknown
	Deliveries int                 `json:"deliveries"`
	Witnessed  int                 `json:"witnessed"`
	OK         int                 `json:"ok"`
	Findings   map[string]*Finding `json:"findings"`
	Latency    map[string]Latency  `json:"latency"`
	Shards     []ShardNote         `json:"shards"`
	Warnings   []string            `json:"warnings,omitempty"`
}

// ShardNote says how a shard file read.
type ShardNote struct {
	Path      string `json:"path"`
	Records   uint64 `json:"records"`
	Bytes     int64  `json:"bytes"`
	Truncated bool   `json:"truncated"`
}

// Names of the findings, in table order.
var Names = []string{"lost", "duplicated", "unexpected", "recovered", "reordered", "skipped"}

type ack struct {
	tick     uint64
	intended time.Duration
	dev      uint32
	conv     uint64
	convSeq  uint64
}

type sendInfo struct {
	dev      uint32
	convType uint8
	target   uint64
}

// witnessed is what the witness pulls saw of one msg_id.
type witnessed struct {
	tick uint64   // the send its content names (0: none, or an older ledger)
	uids []uint64 // inboxes holding it
}

type devState struct {
	uid       uint64
	recv      map[uint64]uint32 // msg_id -> copies
	lastConv  map[uint64]uint64 // conv_id -> last conv_seq (after dedupe)
	claimed   uint64
	hasClaim  bool
	firstSeen map[uint64]time.Duration
}

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
func CheckSources(srcs []Source) (*Verdict, error) {
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
	v := c.verdict()
	for _, in := range infos {
		v.Shards = append(v.Shards, ShardNote{Path: in.Path, Records: in.Records, Bytes: in.Bytes, Truncated: in.Truncated})
		if in.Truncated {
			v.Warnings = append(v.Warnings, fmt.Sprintf("%s is truncated (the run did not close it): read %d records", in.Path, in.Records))
		}
	}
	return v, nil
}

type collector struct {
	devices   map[uint32]*devState
	uidDevs   map[uint64][]uint32
	groups    map[uint64][]uint64
	acks      map[uint64]ack               // msg_id -> ack
	ackByTick map[uint64]uint64            // tick -> msg_id
	unknown   map[uint64]sendInfo          // tick -> send of unknown outcome
	sends     map[uint64]sendInfo          // tick -> every send
	recovered map[uint64]uint64            // msg_id -> tick
	recTick   map[uint64]uint64            // tick -> recovered msg_id
	inbox     map[uint64]map[uint64]uint64 // uid -> msg_id -> seq
	witnessed map[uint64]*witnessed        // msg_ids seen by a witness pull
	attempts  map[string]int
	deliv     int
	witness   int
	f         map[string]*Finding
	unexpSet  map[uint64]bool
	reordSet  map[uint64]bool
	dupSet    map[uint64]bool
	hist      map[string]*hdr.Histogram
}

func newCollector() *collector {
	c := &collector{
		devices: map[uint32]*devState{}, uidDevs: map[uint64][]uint32{}, groups: map[uint64][]uint64{},
		acks: map[uint64]ack{}, ackByTick: map[uint64]uint64{}, unknown: map[uint64]sendInfo{}, sends: map[uint64]sendInfo{},
		recovered: map[uint64]uint64{}, recTick: map[uint64]uint64{}, inbox: map[uint64]map[uint64]uint64{},
		witnessed: map[uint64]*witnessed{}, attempts: map[string]int{"ok": 0, "fail": 0, "unknown": 0},
		f: map[string]*Finding{}, unexpSet: map[uint64]bool{}, reordSet: map[uint64]bool{}, dupSet: map[uint64]bool{},
		hist: map[string]*hdr.Histogram{},
	}
	for _, n := range Names {
		c.f[n] = &Finding{Name: n, MsgIDs: []uint64{}}
	}
	for _, n := range []string{"response", "service", "send_delay", "end_to_end"} {
		c.hist[n] = hdr.New(1, int64(time.Hour/time.Microsecond), 3)
	}
	return c
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
		d = &devState{recv: map[uint64]uint32{}, lastConv: map[uint64]uint64{}, firstSeen: map[uint64]time.Duration{}}
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
		a := r.Attempt
		c.attempts[a.Outcome.String()]++
		si := sendInfo{dev: a.Dev, convType: a.ConvType, target: a.Target}
		c.sends[a.Tick] = si
		switch a.Outcome {
		case ledger.OK:
			if prev, ok := c.acks[a.MsgID]; ok && prev.tick != a.Tick {
				c.unexpSet[a.MsgID] = true
				c.example("unexpected", "msg_id %d ACKed for two sends (ticks %d and %d)", a.MsgID, prev.tick, a.Tick)
			}
			c.acks[a.MsgID] = ack{tick: a.Tick, intended: a.Intended, dev: a.Dev, conv: a.ConvID, convSeq: a.ConvSeq}
			c.ackByTick[a.Tick] = a.MsgID
			c.hist["response"].RecordValue(us(a.Ended - a.Intended))
			c.hist["service"].RecordValue(us(a.Ended - a.Started))
		case ledger.Unknown:
			c.unknown[a.Tick] = si
		}
		c.hist["send_delay"].RecordValue(us(a.Started - a.Intended))
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
		w := r.Witness
		c.known(w.UID)[w.MsgID] = w.Seq
		x := c.witnessed[w.MsgID]
		if x == nil {
			x = &witnessed{}
			c.witnessed[w.MsgID] = x
		}
		if w.Tick != 0 {
			x.tick = w.Tick
		}
		x.uids = append(x.uids, w.UID)
	}
	return nil
}

func (c *collector) known(uid uint64) map[uint64]uint64 {
	m := c.inbox[uid]
	if m == nil {
		m = map[uint64]uint64{}
		c.inbox[uid] = m
	}
	return m
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

// delivery judges one stored message, in its device's order (a device's
// records are all in one shard, in order).
func (c *collector) delivery(d *ledger.Delivery) {
	{
		ds := c.dev(d.Dev)
		c.known(ds.uid)[d.MsgID] = d.Seq
		ds.recv[d.MsgID]++
		if ds.recv[d.MsgID] > 1 {
			c.f["duplicated"].Count++
			c.dupSet[d.MsgID] = true
			return
		}
		ds.firstSeen[d.MsgID] = d.At
		var rcpt []uint64
		if a, ok := c.acks[d.MsgID]; ok {
			rcpt = c.recipients(c.sends[a.tick])
			c.hist["end_to_end"].RecordValue(us(d.At - a.intended))
		} else if s, ok := c.unknown[d.Tick]; ok && d.Tick != 0 {
			if prev, seen := c.recTick[d.Tick]; seen && prev != d.MsgID {
				c.unexpSet[d.MsgID] = true
				c.example("unexpected", "msg_id %d and %d both carry send %d (one client_msg_id, two messages)", prev, d.MsgID, d.Tick)
			} else if !seen {
				c.recTick[d.Tick] = d.MsgID
				c.recovered[d.MsgID] = d.Tick
			}
			rcpt = c.recipients(s)
		} else {
			c.unexpSet[d.MsgID] = true
			if m, acked := c.ackByTick[d.Tick]; acked && d.Tick != 0 {
				c.example("unexpected", "device %d stored msg_id %d for send %d, whose ACK said msg_id %d", d.Dev, d.MsgID, d.Tick, m)
			} else {
				c.example("unexpected", "device %d stored msg_id %d (seq %d) that no ACK names", d.Dev, d.MsgID, d.Seq)
			}
		}
		if rcpt != nil && !contains(rcpt, ds.uid) {
			c.unexpSet[d.MsgID] = true
			c.example("unexpected", "device %d (uid %d) stored msg_id %d addressed to uids %v", d.Dev, ds.uid, d.MsgID, rcpt)
		}
		if last, ok := ds.lastConv[d.ConvID]; ok && d.ConvSeq <= last {
			c.reordSet[d.MsgID] = true
			c.example("reordered", "device %d: conv %d seq %d (msg_id %d) after conv_seq %d", d.Dev, d.ConvID, d.ConvSeq, d.MsgID, last)
		} else {
			ds.lastConv[d.ConvID] = d.ConvSeq
		}
	}
}

func (c *collector) verdict() *Verdict {
	// Witnessed entries: a message of unknown outcome that only the
	// witness saw is recovered (and then lost on every device); one that no
	// send explains, or that sits in the inbox of a uid it is not addressed
	// to, is unexpected.
	wit := slices.Sorted(maps.Keys(c.witnessed))
	for _, m := range wit {
		x := c.witnessed[m]
		var rcpt []uint64
		if a, ok := c.acks[m]; ok {
			rcpt = c.recipients(c.sends[a.tick])
		} else if tick, ok := c.recovered[m]; ok {
			rcpt = c.recipients(c.unknown[tick])
		} else if s, ok := c.unknown[x.tick]; ok && x.tick != 0 {
			if prev, seen := c.recTick[x.tick]; seen && prev != m {
				c.unexpSet[m] = true
				c.example("unexpected", "msg_id %d and %d both carry send %d (one client_msg_id, two messages; witness)", prev, m, x.tick)
				continue
			}
			c.recTick[x.tick] = m
			c.recovered[m] = x.tick
			rcpt = c.recipients(s)
		} else {
			if !c.unexpSet[m] {
				c.example("unexpected", "msg_id %d is in an inbox (witness) but no ACK or unknown send explains it", m)
			}
			c.unexpSet[m] = true
			continue
		}
		for _, u := range x.uids {
			if !contains(rcpt, u) {
				c.unexpSet[m] = true
				c.example("unexpected", "msg_id %d is in uid %d's inbox (witness) but addressed to uids %v", m, u, rcpt)
				break
			}
		}
	}
	// Lost: ACKed or recovered messages missing on a recipient device.
	lostSet := map[uint64]bool{}
	okCount := 0
	checkMsg := func(m uint64, s sendInfo) bool {
		complete := true
		for _, u := range c.recipients(s) {
			for _, dv := range c.uidDevs[u] {
				if c.devices[dv].recv[m] == 0 {
					complete = false
					c.f["lost"].Pairs++
					if !lostSet[m] {
						c.example("lost", "msg_id %d never reached device %d (uid %d)", m, dv, u)
					}
					lostSet[m] = true
				}
			}
		}
		return complete
	}
	for m, a := range c.acks {
		if checkMsg(m, c.sends[a.tick]) {
			okCount++
		}
	}
	for m, tick := range c.recovered {
		checkMsg(m, c.unknown[tick])
	}
	// Skipped: claimed cursors past inbox entries the device never stored.
	skipSet := map[uint64]bool{}
	for id, ds := range c.devices {
		if !ds.hasClaim {
			continue
		}
		for m, seq := range c.inbox[ds.uid] {
			if seq <= ds.claimed && ds.recv[m] == 0 {
				c.f["skipped"].Pairs++
				if !skipSet[m] {
					c.example("skipped", "device %d acked cursor %d but never stored msg_id %d at seq %d", id, ds.claimed, m, seq)
				}
				skipSet[m] = true
			}
		}
	}
	set := func(name string, s map[uint64]bool, countIsSet bool) {
		f := c.f[name]
		for m := range s {
			f.MsgIDs = append(f.MsgIDs, m)
		}
		sort.Slice(f.MsgIDs, func(i, j int) bool { return f.MsgIDs[i] < f.MsgIDs[j] })
		if countIsSet {
			f.Count = len(f.MsgIDs)
		}
	}
	set("lost", lostSet, true)
	set("unexpected", c.unexpSet, true)
	set("reordered", c.reordSet, true)
	set("skipped", skipSet, true)
	set("duplicated", c.dupSet, false)
	rec := map[uint64]bool{}
	for m := range c.recovered {
		rec[m] = true
	}
	set("recovered", rec, true)
	v := &Verdict{
		Devices: len(c.devices), Users: len(c.uidDevs), Groups: len(c.groups), Attempts: c.attempts,
		Deliveries: c.deliv, Witnessed: c.witness, OK: okCount, Findings: c.f, Latency: map[string]Latency{},
	}
	for n, h := range c.hist {
		v.Latency[n] = Latency{Count: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
			P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
	}
	v.Valid = c.f["lost"].Count == 0 && c.f["unexpected"].Count == 0 && c.f["skipped"].Count == 0
	if c.witness == 0 {
		v.Warnings = append(v.Warnings, "no witness pull in the ledger: skipped is judged from device deliveries only")
	}
	return v
}

// WriteTable prints the verdict as a table.
func (v *Verdict) WriteTable(w io.Writer) {
	verdict := "VALID"
	if !v.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(w, "verdict: %s  (valid iff lost = unexpected = skipped = 0)\n", verdict)
	fmt.Fprintf(w, "population: %d users, %d devices, %d groups; attempts ok %d, fail %d, unknown %d; deliveries %d; witnessed %d\n",
		v.Users, v.Devices, v.Groups, v.Attempts["ok"], v.Attempts["fail"], v.Attempts["unknown"], v.Deliveries, v.Witnessed)
	fmt.Fprintf(w, "%-11s %9s %9s  %s\n", "finding", "count", "pairs", "msg_ids")
	fmt.Fprintf(w, "%-11s %9d %9s  %s\n", "ok", v.OK, "", "")
	for _, n := range Names {
		f := v.Findings[n]
		ids := make([]string, 0, MaxListed)
		for i, m := range f.MsgIDs {
			if i == MaxListed {
				ids = append(ids, fmt.Sprintf("... (+%d)", len(f.MsgIDs)-MaxListed))
				break
			}
			ids = append(ids, fmt.Sprint(m))
		}
		pairs := ""
		if n == "lost" || n == "skipped" {
			pairs = fmt.Sprint(f.Pairs)
		}
		fmt.Fprintf(w, "%-11s %9d %9s  %s\n", n, f.Count, pairs, strings.Join(ids, " "))
		for _, e := range f.Examples {
			fmt.Fprintf(w, "%-11s %9s %9s    e.g. %s\n", "", "", "", e)
		}
	}
	fmt.Fprintf(w, "latency (µs)   count      p50      p90      p99     p999      max\n")
	for _, n := range []string{"response", "service", "send_delay", "end_to_end"} {
		l := v.Latency[n]
		fmt.Fprintf(w, "%-11s %8d %8d %8d %8d %8d %8d\n", n, l.Count, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	for _, s := range v.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

// WriteJSON writes the verdict as indented JSON.
func (v *Verdict) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
