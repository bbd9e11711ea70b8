package msgid

import (
	"sync"
	"testing"
	"time"
)

func TestNodeRange(t *testing.T) {
	if _, err := New(MaxNode + 1); err == nil {
		t.Fatal("node 1024 accepted")
	}
	g, err := New(MaxNode)
	if err != nil {
		t.Fatal(err)
	}
	id := g.Next()
	if NodeOf(id) != MaxNode {
		t.Fatalf("node of id = %d, want %d", NodeOf(id), MaxNode)
	}
}

func TestMonotonicAndTime(t *testing.T) {
	g, err := New(7)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Millisecond)
	var last uint64
	for i := 0; i < 20000; i++ {
		id := g.Next()
		if id <= last {
			t.Fatalf("id %d not above previous %d", id, last)
		}
		last = id
	}
	after := time.Now()
	tm := Time(last)
	if tm.Before(before) || tm.After(after) {
		t.Fatalf("Time(id) = %v, not within [%v, %v]", tm, before, after)
	}
}

func TestUniqueAcrossGoroutinesAndNodes(t *testing.T) {
	gens := make([]*Generator, 2)
	for i := range gens {
		g, err := New(uint16(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		gens[i] = g
	}
	const workers, per = 8, 5000
	out := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			g := gens[w%2]
			ids := make([]uint64, per)
			for i := range ids {
				ids[i] = g.Next()
			}
			out[w] = ids
		}(w)
	}
	wg.Wait()
	seen := make(map[uint64]bool, workers*per)
	for _, ids := range out {
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("ids of one goroutine not increasing: %d then %d", ids[i-1], id)
			}
		}
	}
}

// fakeClock steps only when told to, and advances by the slept duration.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
	c.sleeps++
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func TestClockStepBackWaits(t *testing.T) {
	start := Epoch().Add(1000 * time.Hour)
	c := &fakeClock{now: start}
	g, err := NewWithClock(3, c)
	if err != nil {
		t.Fatal(err)
	}
	a := g.Next()
	c.set(start.Add(-50 * time.Millisecond)) // clock steps back 50ms
	b := g.Next()
	if b <= a {
		t.Fatalf("after step back: %d not above %d", b, a)
	}
	if c.slept < 50*time.Millisecond {
		t.Fatalf("generator slept %s, want >= 50ms (it must wait for the clock)", c.slept)
	}
	if Time(b).Before(Time(a)) {
		t.Fatalf("time went back in ids: %v then %v", Time(a), Time(b))
	}
}

func TestSequenceOverflowWaitsForNextMs(t *testing.T) {
	start := Epoch().Add(time.Hour)
	c := &fakeClock{now: start}
	g, err := NewWithClock(1, c)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[uint64]bool)
	var last uint64
	for i := 0; i < 3*(maxSeq+1); i++ {
		id := g.Next()
		if seen[id] || id <= last {
			t.Fatalf("id %d repeated or not increasing (last %d) at %d", id, last, i)
		}
		seen[id] = true
		last = id
	}
	if c.sleeps != 2 {
		t.Fatalf("sleeps = %d, want 2 (one per exhausted millisecond)", c.sleeps)
	}
	if got := Time(last); !got.Equal(start.Add(2 * time.Millisecond)) {
		t.Fatalf("last id time %v, want %v", got, start.Add(2*time.Millisecond))
	}
}

func TestEpoch(t *testing.T) {
	if !Epoch().Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("epoch %v", Epoch())
	}
}
