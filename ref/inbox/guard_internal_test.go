package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/model"
)

// fenceRows creates seq_fence rows uid -> max_seq.
func fenceRows(t testing.TB, db *sql.DB, rows map[uint64]uint64) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES ")
	i := 0
	for u, s := range rows {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "(%d,%d,UTC_TIMESTAMP(3))", u, s)
		i++
	}
	if _, err := db.Exec(sb.String()); err != nil {
		t.Fatal(err)
	}
}

// raiseIn runs one guarded raise by 1 of every uid of bets (uid -> the
// fence it bets on) in its own transaction, rolled back, and returns the
// rows it raised.
func raiseIn(t *testing.T, db *sql.DB, bets map[uint64]uint64, packed bool) int {
	t.Helper()
	ctx := context.Background()
	uids := slices.Sorted(maps.Keys(bets))
	firsts := map[uint64]uint64{}
	for u, b := range bets {
		firsts[u] = b + 1
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n, err := guardedRaiseAs(ctx, tx, &PrimaryHint{}, uids, map[uint64][]uint64{1: uids}, firsts, packed)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Both guard forms raise exactly the rows whose fence is the bet; the
// packed one also where a row's max_seq of 2^32 or more would pack to
// another uid's bet (the bound refuses it), and packable leaves uids over
// 32 bits and bets of 32 bits or more to the row constructors.
func TestGuardForms(t *testing.T) {
	m := testenv.NewMySQL(t)
	const big = uint64(1) << 32
	fenceRows(t, m.DB, map[uint64]uint64{
		5:       big + 7, // packs to (6, 7)
		6:       9,
		7:       3,
		8:       0,
		big - 1: 4,
		9:       big + 2,
	})
	cases := []struct {
		bets           map[uint64]uint64
		tuples, packed int // rows raised by each form
	}{
		{map[uint64]uint64{6: 9, 7: 3, 8: 0}, 3, 3}, // every bet holds
		{map[uint64]uint64{6: 9, 7: 4, 8: 0}, 2, 2}, // one is off by one
		{map[uint64]uint64{5: 3, 6: 7}, 0, 0},       // (5, 2^32+7) is not (6, 7)
		{map[uint64]uint64{404: 0, 7: 3}, 1, 1},     // a uid without a row misses
		// Bets packable refuses: the row constructors say them, the
		// packed form (were it forced) misses them, never raises wrongly.
		{map[uint64]uint64{5: big + 7, 7: 3}, 2, 1},
		{map[uint64]uint64{9: big + 2, big - 1: 4}, 2, 1},
	}
	for _, c := range cases {
		if got := raiseIn(t, m.DB, c.bets, false); got != c.tuples {
			t.Errorf("row constructors, bets %v: %d rows raised, want %d", c.bets, got, c.tuples)
		}
		if got := raiseIn(t, m.DB, c.bets, true); got != c.packed {
			t.Errorf("packed, bets %v: %d rows raised, want %d", c.bets, got, c.packed)
		}
	}
	for _, c := range []struct {
		bets map[uint64]uint64
		want bool
	}{
		{map[uint64]uint64{6: 9, model.MaxUID: big - 1, big - 1: 4}, true},
		{map[uint64]uint64{6: 9, big: 4}, false},
		{map[uint64]uint64{6: big}, false},
	} {
		uids := make([]uint64, 0, len(c.bets))
		firsts := map[uint64]uint64{}
		for u, b := range c.bets {
			uids = append(uids, u)
			firsts[u] = b + 1
		}
		if got := packable(uids, firsts); got != c.want {
			t.Errorf("packable(%v) = %v, want %v", c.bets, got, c.want)
		}
	}
}

// BenchmarkGuardForm is one guarded raise of 392 random uids of 100,000
// (a strict batch of 196 1:1 messages) per transaction, one connection,
// per guard form; db-µs/row is mariadbd's CPU per raised row.
//
//	go test -run '^$' -bench BenchmarkGuardForm -benchtime=400x ./ref/inbox/
func BenchmarkGuardForm(b *testing.B) {
	const users, rows = 100_000, 392
	for _, packed := range []bool{false, true} {
		b.Run(map[bool]string{false: "tuples", true: "packed"}[packed], func(b *testing.B) {
			m := testenv.NewMySQL(b)
			for lo := uint64(1); lo <= users; lo += 5000 {
				fence := map[uint64]uint64{}
				for u := lo; u < lo+5000 && u <= users; u++ {
					fence[u] = 0
				}
				fenceRows(b, m.DB, fence)
			}
			fence := make([]uint64, users+1)
			rng := rand.New(rand.NewPCG(1, 2))
			ctx := context.Background()
			pid := budget.ServerPID(ctx, m.DB)
			cpu0 := budget.ReadCPU(pid)
			b.ResetTimer()
			for range b.N {
				pick := map[uint64]bool{}
				for len(pick) < rows {
					pick[1+rng.Uint64N(users)] = true
				}
				uids := slices.Sorted(maps.Keys(pick))
				firsts := make(map[uint64]uint64, rows)
				for _, u := range uids {
					firsts[u] = fence[u] + 1
				}
				tx, err := m.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
				if err != nil {
					b.Fatal(err)
				}
				n, err := guardedRaiseAs(ctx, tx, &PrimaryHint{}, uids, map[uint64][]uint64{1: uids}, firsts, packed)
				if err != nil || n != rows {
					b.Fatalf("raised %d of %d: %v", n, rows, err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				for _, u := range uids {
					fence[u]++
				}
			}
			b.StopTimer()
			// An unreadable server (remote, not ours) reports nothing,
			// not 0.
			if cpu1 := budget.ReadCPU(pid); cpu0.ServerOK && cpu1.ServerOK {
				b.ReportMetric(float64((cpu1.Server-cpu0.Server).Microseconds())/float64(b.N*rows), "db-µs/row")
			}
		})
	}
}
