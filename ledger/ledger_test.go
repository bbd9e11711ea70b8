package ledger

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleRecords(r *rand.Rand, n int) []Record {
	var out []Record
	out = append(out,
		Record{Kind: KindDevice, Device: Device{Dev: 0, UID: 1, Kind: Online, DID: "d0"}},
		Record{Kind: KindDevice, Device: Device{Dev: 7, UID: 1<<31 - 1, Kind: Crashy, DID: "crashy-7"}},
		Record{Kind: KindGroup, Group: Group{GroupID: 1<<62 - 1, Members: []uint64{1, 5, 1 << 31}}},
	)
	msg := uint64(1) << 50
	for i := 0; i < n; i++ {
		msg += uint64(r.IntN(1 << 20))
		conv := uint64(1)<<63 | uint64(r.IntN(50))<<31 | uint64(r.IntN(50))
		switch r.IntN(8) {
		case 6, 7:
			out = append(out, sampleV3(r, msg, conv))
		case 5:
			switch r.IntN(3) {
			case 0:
				out = append(out, Record{Kind: KindStored, Witness: Witness{UID: uint64(r.IntN(1 << 31)), Seq: uint64(r.IntN(1e9)),
					MsgID: msg, ConvID: conv, ConvSeq: uint64(r.IntN(1e6)), Tick: uint64(r.IntN(1e6))}})
			case 1:
				st := ProbeStatus(r.IntN(2) + 1)
				p := Probe{Tick: uint64(r.IntN(1e6)), MsgID: msg, UID: uint64(r.IntN(1 << 31)), Status: st,
					At: time.Duration(r.Int64N(int64(time.Hour))).Truncate(time.Microsecond)}
				if st == ProbeRead {
					p.Found = uint8(r.IntN(8))
				} else {
					p.HTTP = uint16(r.IntN(600))
				}
				out = append(out, Record{Kind: KindProbe, Probe: p})
			default:
				out = append(out, Record{Kind: KindNote, Note: Note{Check: "store-witness", Made: r.IntN(2) == 0, Reason: "x", Policy: "strict", UIDs: r.IntN(100), Errors: r.IntN(3)}})
			}
		case 0, 1:
			a := Attempt{Tick: uint64(i + 1), Dev: uint32(r.IntN(1000)), ConvType: 1, Target: uint64(r.IntN(1 << 31)),
				Intended: time.Duration(i) * 20 * time.Microsecond, Tries: uint8(r.IntN(3) + 1), Status: 200}
			a.Started = a.Intended + time.Duration(r.IntN(2000))
			a.Ended = a.Started + time.Duration(r.IntN(5e6))
			a.Outcome = Outcome(r.IntN(3) + 1)
			if a.Outcome == OK {
				a.MsgID, a.ConvID, a.ConvSeq = msg, conv, uint64(r.IntN(1e6))
			} else {
				a.Status = uint16(r.IntN(600))
				if r.IntN(2) == 0 {
					a.ConvID = conv // version 3: the conversation of a send not ACKed
				}
			}
			a.TriedUnknown = a.Tries > 1 && r.IntN(2) == 0
			out = append(out, Record{Kind: KindAttempt, Attempt: a})
		case 2, 3:
			out = append(out, Record{Kind: KindDelivery, Delivery: Delivery{Dev: uint32(r.IntN(1000)), Via: Via(r.IntN(2) + 1),
				Seq: uint64(r.IntN(1e9)), MsgID: msg - uint64(r.IntN(1000)), ConvID: conv, ConvSeq: uint64(r.IntN(1e6)),
				Tick: uint64(r.IntN(i + 1)), At: time.Duration(r.Int64N(int64(time.Hour))).Truncate(time.Microsecond)}})
		case 4:
			if r.IntN(2) == 0 {
				out = append(out, Record{Kind: KindCursor, Cursor: Cursor{Dev: uint32(r.IntN(1000)), Seq: uint64(r.IntN(1e9)),
					Status: CursorStatus(r.IntN(3) + 1), At: time.Duration(r.Int64N(int64(time.Hour))).Truncate(time.Microsecond)}})
			} else {
				out = append(out, Record{Kind: KindWitness, Witness: Witness{UID: uint64(r.IntN(1 << 31)), Seq: uint64(r.IntN(1e9)),
					MsgID: msg, ConvID: conv, ConvSeq: uint64(r.IntN(1e6)), Tick: uint64(r.IntN(3)) * uint64(r.IntN(1e6))}})
			}
		}
	}
	return out
}

// sampleV3 is one random record of a kind version 3 added.
func sampleV3(r *rand.Rand, msg, conv uint64) Record {
	at := func() time.Duration { return time.Duration(r.Int64N(int64(time.Hour))).Truncate(time.Microsecond) }
	act := Act{Dev: uint32(r.IntN(1000)), ConvID: conv, Intended: time.Duration(r.Int64N(int64(time.Hour))), Outcome: Outcome(r.IntN(3) + 1), Status: uint16(r.IntN(600))}
	act.Started = act.Intended + time.Duration(r.IntN(2000))
	act.Ended = act.Started + time.Duration(r.IntN(5e6))
	seq := func() uint64 { return uint64(r.IntN(1e6)) }
	switch k := r.IntN(10); k {
	case 0:
		p := ConvPull{Act: act, Cursor: seq(), Limit: uint32(r.IntN(51)), HasMore: r.IntN(2) == 0, NextCursor: seq(), SyncRead: r.IntN(2) == 0}
		if p.SyncRead {
			p.SyncBefore, p.SyncAfter = seq(), seq()
		}
		for i := range r.IntN(5) {
			p.Items = append(p.Items, PulledItem{Seq: p.Cursor + uint64(i) + 1, MsgID: msg + uint64(i), ConvSeq: seq()})
		}
		return Record{Kind: KindAction, Action: ActConvPull, ConvPull: p}
	case 1:
		p := HistoryPage{Act: act, From: seq(), To: seq()}
		for i := range r.IntN(5) {
			p.Items = append(p.Items, PageItem{ConvSeq: p.From + uint64(i), MsgID: msg - uint64(i), Sender: uint64(r.IntN(1 << 31)), Tag: seq(),
				Revoked: r.IntN(2) == 0, Tombstone: r.IntN(3) == 0, Read: ReadMark(r.IntN(3))})
		}
		return Record{Kind: KindAction, Action: ActHistory, History: p}
	case 2, 3:
		return Record{Kind: KindAction, Action: []Action{ActRevoke, ActDelete}[k-2], MsgAction: MsgAction{Act: act, ConvSeq: seq()}}
	case 4:
		return Record{Kind: KindAction, Action: ActClear, Clear: Clear{Act: act, MinSeq: seq()}}
	case 5:
		return Record{Kind: KindAction, Action: ActRead, Read: MarkRead{Act: act, From: seq(), To: seq()}}
	case 6:
		x := Slot{ConvID: conv, ConvSeq: seq(), MsgID: msg, Sender: uint64(r.IntN(1 << 31)), Tag: seq(), Revoked: r.IntN(2) == 0,
			Purged: r.IntN(5) == 0, IsRead: r.IntN(2) == 0, At: at()}
		for range r.IntN(4) {
			x.DelList = append(x.DelList, uint64(r.IntN(1<<31)))
		}
		return Record{Kind: KindHistory, HistoryPart: PartSlot, Slot: x}
	case 7:
		if r.IntN(2) == 0 {
			return Record{Kind: KindHistory, HistoryPart: PartWatermark, Watermark: Watermark{ConvID: conv, UID: uint64(r.IntN(1 << 31)), MinSeq: seq(), At: at()}}
		}
		return Record{Kind: KindHistory, HistoryPart: PartHead, Head: ConvHead{ConvID: conv, MaxSeq: seq(), At: at()}}
	case 8:
		if r.IntN(3) == 0 {
			return Record{Kind: KindRetention, IsSettings: true, Settings: RetentionSettings{MaxAge: at(), PulledMinAge: at(), Interval: at(), At: at()}}
		}
		return Record{Kind: KindRetention, Deletion: Deletion{UID: uint64(r.IntN(1 << 31)), Seq: seq(), MsgID: msg, CreatedAt: at() - 30*time.Minute,
			DeletedAt: at(), Reason: RetentionReason(r.IntN(2) + 1)}}
	}
	if r.IntN(2) == 0 {
		return Record{Kind: KindContact, Contact: Contact{Dev: uint32(r.IntN(1000)), At: at() - 30*time.Minute}}
	}
	return Record{Kind: KindDelRange, DelRange: DelRange{ConvID: conv, From: seq(), To: seq(), UID: uint64(r.IntN(3)), At: at()}}
}

func write(t *testing.T, s *Shard, rec Record) {
	t.Helper()
	switch rec.Kind {
	case KindAction:
		var err error
		switch rec.Action {
		case ActConvPull:
			err = s.ConvPull(rec.ConvPull)
		case ActHistory:
			err = s.HistoryPage(rec.History)
		case ActRevoke:
			s.Revoke(rec.MsgAction)
		case ActDelete:
			s.Delete(rec.MsgAction)
		case ActClear:
			s.Clear(rec.Clear)
		case ActRead:
			s.MarkRead(rec.Read)
		}
		if err != nil {
			t.Fatal(err)
		}
	case KindHistory:
		switch rec.HistoryPart {
		case PartSlot:
			if err := s.Slot(rec.Slot); err != nil {
				t.Fatal(err)
			}
		case PartWatermark:
			s.Watermark(rec.Watermark)
		case PartHead:
			s.ConvHead(rec.Head)
		}
	case KindRetention:
		if rec.IsSettings {
			s.Retention(rec.Settings)
		} else {
			s.Deletion(rec.Deletion)
		}
	case KindDelRange:
		s.DelRange(rec.DelRange)
	case KindContact:
		s.Contact(rec.Contact)
	case KindDevice:
		s.Device(rec.Device)
	case KindGroup:
		if err := s.Group(rec.Group); err != nil {
			t.Fatal(err)
		}
	case KindAttempt:
		s.Attempt(rec.Attempt)
	case KindDelivery:
		s.Delivery(rec.Delivery)
	case KindCursor:
		s.Cursor(rec.Cursor)
	case KindWitness:
		s.Witness(rec.Witness)
	case KindStored:
		s.Stored(rec.Witness)
	case KindProbe:
		s.Probe(rec.Probe)
	case KindNote:
		if err := s.Note(rec.Note); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, "run-1", time.Unix(100, 5), 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	want := make([][]Record, 3)
	for i, rec := range sampleRecords(r, 5000) {
		sh := i % 3
		write(t, l.Shard(sh), rec)
		want[sh] = append(want[sh], rec)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := make([][]Record, 3)
	infos, err := ReadDir(dir, func(shard int, r *Record) error {
		got[shard] = append(got[shard], *r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !infos[i].Closed || infos[i].Truncated || infos[i].Header.Version != Version || infos[i].Header.RunID != "run-1" || infos[i].Header.Shard != i ||
			infos[i].Header.StartUnixNano != time.Unix(100, 5).UnixNano() || infos[i].Records != uint64(len(want[i])) {
			t.Fatalf("shard %d info %+v", i, infos[i])
		}
		if len(got[i]) != len(want[i]) {
			t.Fatalf("shard %d: %d records, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if !reflect.DeepEqual(got[i][j], want[i][j]) {
				t.Fatalf("shard %d record %d:\n got %+v\nwant %+v", i, j, got[i][j], want[i][j])
			}
		}
	}
	if _, err := Create(dir, "run-2", time.Now(), 1); err == nil {
		t.Fatal("Create over an existing ledger must fail")
	}
}

// TestTruncated: a shard cut anywhere reads up to its last whole record.
func TestTruncated(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, "r", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	recs := sampleRecords(rand.New(rand.NewPCG(3, 4)), 300)
	for _, rec := range recs {
		write(t, l.Shard(0), rec)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(ShardPath(dir, 0))
	if err != nil {
		t.Fatal(err)
	}
	prev := uint64(0)
	for _, cut := range []int{len(full) - 1, len(full) - 7, len(full) / 2, len(full) / 3, len(full) / 10} {
		if err := os.WriteFile(ShardPath(dir, 0), full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		var n uint64
		infos, err := ReadDir(dir, func(_ int, r *Record) error {
			if !reflect.DeepEqual(*r, recs[n]) {
				t.Fatalf("cut %d: record %d differs", cut, n)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if !infos[0].Truncated || infos[0].Closed || n != infos[0].Records || n > uint64(len(recs)) {
			t.Fatalf("cut %d: info %+v read %d", cut, infos[0], n)
		}
		if prev != 0 && n > prev {
			t.Fatalf("cut %d: read more (%d) than a longer prefix (%d)", cut, n, prev)
		}
		prev = n
	}
	if err := os.WriteFile(ShardPath(dir, 0), []byte("NOTALEDGER"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir, func(int, *Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad magic: %v", err)
	}
	if _, err := ReadDir(t.TempDir(), func(int, *Record) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty dir: %v", err)
	}
}

func TestLimits(t *testing.T) {
	if _, err := Create(t.TempDir(), "r", time.Now(), 0); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	l, err := Create(t.TempDir(), "r", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Shard(0).Group(Group{GroupID: 1, Members: make([]uint64, MaxGroupMembers+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}

// TestSizePerMessage measures the ledger's bytes per sent message for a
// realistic 1:1 mix at 50k/s: the attempt with its ACK, its deliveries to
// both parties' devices (2 devices each), and a cursor ack every 20
// deliveries. A 10-minute run at 50k/s is 30M messages.
func TestSizePerMessage(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, "r", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	const users, msgs = 10000, 50000
	r := rand.New(rand.NewPCG(5, 6))
	userSeq := make([]uint64, users)
	convSeq := map[uint64]uint64{}
	sh := l.Shard(0)
	msg := uint64(1) << 60
	deliveries := 0
	for i := 0; i < msgs; i++ {
		at := time.Duration(i) * 20 * time.Microsecond
		from, to := r.IntN(users), r.IntN(users-1)
		if to >= from {
			to++
		}
		lo, hi := min(from, to), max(from, to)
		conv := uint64(1)<<63 | uint64(lo+1)<<31 | uint64(hi+1)
		convSeq[conv]++
		msg += uint64(r.IntN(200) + 1)
		sh.Attempt(Attempt{Tick: uint64(i + 1), Dev: uint32(from * 2), ConvType: 1, Target: uint64(to + 1), Intended: at,
			Started: at + time.Duration(r.IntN(30000)), Ended: at + time.Duration(r.IntN(3e6)+30000), Outcome: OK, Tries: 1,
			Status: 200, MsgID: msg, ConvID: conv, ConvSeq: convSeq[conv]})
		for _, u := range []int{from, to} {
			userSeq[u]++
			for d := 0; d < 2; d++ {
				dev := uint32(u*2 + d)
				sh.Delivery(Delivery{Dev: dev, Via: Push, Seq: userSeq[u], MsgID: msg, ConvID: conv, ConvSeq: convSeq[conv],
					Tick: uint64(i + 1), At: at + time.Duration(r.IntN(5e6))})
				deliveries++
				if deliveries%20 == 0 {
					sh.Cursor(Cursor{Dev: dev, Seq: userSeq[u], Status: Sent, At: at + 5*time.Millisecond})
				}
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ShardPath(dir, 0))
	if err != nil {
		t.Fatal(err)
	}
	per := float64(fi.Size()) / msgs
	t.Logf("ledger: %.1f bytes per 1:1 message with 4 deliveries; a 10-minute run at 50k/s (30M messages) ≈ %.1f GiB",
		per, per*30e6/(1<<30))
	if per > 160 {
		t.Fatalf("ledger too large: %.1f bytes per message", per)
	}
}

// TestVersion1: a shard written before the version field reads as version
// 1; a version newer than this reader is refused; an oversized note is an
// error and writes nothing.
func TestVersion1(t *testing.T) {
	dir := t.TempDir()
	shard := func(hdr string) string {
		b := []byte(Magic)
		b = binary.AppendUvarint(b, uint64(len(hdr)))
		b = append(b, hdr...)
		b = append(b, byte(KindEnd), 0)
		p := ShardPath(dir, 0)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	info, err := ReadFile(shard(`{"run_id":"old","shard":0,"start_unix_nano":1}`), func(*Record) error { return nil })
	if err != nil || info.Header.Version != 1 || !info.Closed {
		t.Fatalf("v1 shard: %+v %v", info, err)
	}
	if _, err := ReadFile(shard(`{"version":99,"run_id":"new","shard":0}`), func(*Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("future version: %v", err)
	}
	l, err := Create(t.TempDir(), "r", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Shard(0).Note(Note{Check: "x", Reason: strings.Repeat("y", MaxNoteBytes)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized note: %v", err)
	}
}
