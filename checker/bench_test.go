package checker

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"imlab/ledger"
)

// bigLedger writes a valid ledger of sends messages among users uids (two
// devices each, both online) and 50 groups of 20 members (one send in ten
// goes to a group), with every delivery, a pull witness, a store witness
// and their notes, over 8 shards: the shape of a long load run.
func bigLedger(tb testing.TB, sends, users int) string {
	tb.Helper()
	dir := tb.TempDir()
	l, err := ledger.Create(dir, "bench", time.Now(), 8)
	if err != nil {
		tb.Fatal(err)
	}
	const groups, members = 50, 20
	dev := func(uid uint64, d int) uint32 { return uint32(2*(uid-1)) + uint32(d) }
	for u := uint64(1); u <= uint64(users); u++ {
		for d := range 2 {
			l.Shard(int(dev(u, d))).Device(ledger.Device{Dev: dev(u, d), UID: u, Kind: ledger.Online, DID: fmt.Sprint("d", d)})
		}
	}
	member := map[uint64][]uint64{}
	for g := uint64(1); g <= groups; g++ {
		for k := range uint64(members) {
			member[g] = append(member[g], (g*7+k*13)%uint64(users)+1)
		}
		if err := l.Shard(int(g)).Group(ledger.Group{GroupID: g, Members: member[g]}); err != nil {
			tb.Fatal(err)
		}
	}
	inboxSeq := map[uint64]uint64{}
	convSeq := map[uint64]uint64{}
	type wentry struct{ uid, seq, msg, conv, convSeq, tick uint64 }
	var inbox []wentry
	for i := 1; i <= sends; i++ {
		tick := uint64(i)
		sender := uint64(i%users) + 1
		at := time.Duration(i) * 100 * time.Microsecond
		a := ledger.Attempt{Tick: tick, Dev: dev(sender, 0), Intended: at, Started: at, Ended: at + time.Millisecond, Outcome: ledger.OK, Tries: 1, MsgID: 1_000_000 + tick}
		var rcpt []uint64
		if i%10 == 0 {
			g := uint64(i/10%groups) + 1
			a.ConvType, a.Target, a.ConvID, rcpt = 2, g, g, member[g]
			// The sender must be a member: send from the group's first one.
			sender = member[g][0]
			a.Dev = dev(sender, 0)
		} else {
			to := uint64((i*31)%users) + 1
			if to == sender {
				to = sender%uint64(users) + 1
			}
			lo, hi := min(sender, to), max(sender, to)
			a.ConvType, a.Target, a.ConvID, rcpt = 1, to, uint64(1)<<63|lo<<31|hi, []uint64{sender, to}
		}
		convSeq[a.ConvID]++
		a.ConvSeq = convSeq[a.ConvID]
		l.Shard(i).Attempt(a)
		for _, u := range rcpt {
			inboxSeq[u]++
			seq := inboxSeq[u]
			inbox = append(inbox, wentry{u, seq, a.MsgID, a.ConvID, a.ConvSeq, tick})
			for d := range 2 {
				dv := dev(u, d)
				l.Shard(int(dv)).Delivery(ledger.Delivery{Dev: dv, Via: ledger.Push, Seq: seq, MsgID: a.MsgID, ConvID: a.ConvID, ConvSeq: a.ConvSeq, Tick: tick, At: at + 2*time.Millisecond})
			}
		}
	}
	for u := uint64(1); u <= uint64(users); u++ {
		for d := range 2 {
			l.Shard(int(dev(u, d))).Cursor(ledger.Cursor{Dev: dev(u, d), Seq: inboxSeq[u], Status: ledger.Accepted, At: time.Duration(sends) * 100 * time.Microsecond})
		}
	}
	for i, e := range inbox {
		w := ledger.Witness{UID: e.uid, Seq: e.seq, MsgID: e.msg, ConvID: e.conv, ConvSeq: e.convSeq, Tick: e.tick}
		l.Shard(i).Witness(w)
		l.Shard(i).Stored(w)
	}
	for _, n := range []ledger.Note{
		{Check: CheckPullWitness, Made: true, UIDs: users},
		{Check: CheckStoreWitness, Made: true, Policy: "strict", UIDs: users},
		{Check: CheckReadAfterAck, Made: true, Policy: "strict"},
	} {
		if err := l.Shard(0).Note(n); err != nil {
			tb.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// peakHeap samples the heap every few milliseconds until stop is called,
// which returns the highest samples in bytes: of the heap's objects (live
// and not yet collected), and of the heap live after a collection.
func peakHeap() (stop func() (objects, live uint64)) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var peak, peakLive uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			peakLive = max(peakLive, s[1].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() (uint64, uint64) { close(done); wg.Wait(); return peak, peakLive }
}

// BenchmarkCheckLarge judges a valid ledger of 100,000 sends among 2,000
// users (about 760,000 deliveries, 380,000 pull and as many store witness
// entries): time per verdict, bytes allocated, the peak heap (objects not
// yet collected included) and the peak heap live after a collection.
//
//	go test -run '^$' -bench BenchmarkCheckLarge -benchmem -count 3 ./checker/
func BenchmarkCheckLarge(b *testing.B) {
	dir := bigLedger(b, 100_000, 2_000)
	runtime.GC()
	var peak, live uint64
	b.ResetTimer()
	for b.Loop() {
		stop := peakHeap()
		v, err := Check(dir)
		p, l := stop()
		peak, live = max(peak, p), max(live, l)
		if err != nil {
			b.Fatal(err)
		}
		if !v.Valid || v.OK != 100_000 {
			b.Fatalf("valid %v ok %d: the bench ledger must be valid", v.Valid, v.OK)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(live)/(1<<20), "peak-live-MiB")
}
