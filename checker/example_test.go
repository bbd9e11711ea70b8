package checker_test

import (
	"fmt"
	"os"
	"time"

	"imlab/checker"
	"imlab/ledger"
)

// Judging a ledger: a run of two users, one device each. User 1 sent
// user 2 two messages and both were ACKed, but user 2's device stored
// only the first: the second is lost, and the verdict is invalid.
func ExampleCheck() {
	dir, err := os.MkdirTemp("", "imlab-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	const conv = uint64(1)<<63 | 1<<31 | 2 // the 1:1 conversation of uids 1 and 2

	l, err := ledger.Create(dir, "example", time.Now(), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	s := l.Shard(0)
	s.Device(ledger.Device{Dev: 0, UID: 1, Kind: ledger.Online, DID: "a"})
	s.Device(ledger.Device{Dev: 1, UID: 2, Kind: ledger.Online, DID: "b"})
	for i, msg := range []uint64{101, 102} {
		tick := uint64(i + 1)
		s.Attempt(ledger.Attempt{Tick: tick, Dev: 0, ConvType: 1, Target: 2, Intended: ms(i), Started: ms(i), Ended: ms(i + 1),
			Outcome: ledger.OK, Tries: 1, MsgID: msg, ConvID: conv, ConvSeq: tick})
		// The sender's own device gets every message it sent.
		s.Delivery(ledger.Delivery{Dev: 0, Via: ledger.Push, Seq: tick, MsgID: msg, ConvID: conv, ConvSeq: tick, Tick: tick, At: ms(10 + i)})
	}
	s.Delivery(ledger.Delivery{Dev: 1, Via: ledger.Push, Seq: 1, MsgID: 101, ConvID: conv, ConvSeq: 1, Tick: 1, At: ms(10)})
	if err := l.Close(); err != nil {
		fmt.Println(err)
		return
	}

	v, err := checker.Check(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("valid:", v.Valid)
	fmt.Println("lost:", v.Findings[checker.Lost].Count, v.Findings[checker.Lost].MsgIDs)
	// Output:
	// valid: false
	// lost: 1 [102]
}
