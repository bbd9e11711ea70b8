package ledger

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestTargetHeader: the capabilities a producer states are in every
// shard's header; Create states none (the reference); a target naming an
// action nobody knows, or no driver, is refused.
func TestTargetHeader(t *testing.T) {
	dir := t.TempDir()
	caps := &Capabilities{Driver: "tinode", Inbox: false, IdempotentSend: false, Actions: []string{"history", DelRangeCapability}}
	l, err := CreateWith(dir, Options{RunID: "t", Start: time.Unix(5, 0), Shards: 2, Target: caps})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	infos, err := ReadDir(dir, func(int, *Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Header.Version != 3 || !reflect.DeepEqual(in.Header.Target, caps) {
			t.Fatalf("header %+v", in.Header)
		}
	}
	if !caps.Offers("history") || caps.Offers("revoke") || !DefaultCapabilities().Offers("conv-pull") || DefaultCapabilities().Offers(DelRangeCapability) {
		t.Fatal("Offers")
	}
	plain := t.TempDir()
	if l, err = Create(plain, "p", time.Now(), 1); err != nil {
		t.Fatal(err)
	}
	l.Close()
	infos, _ = ReadDir(plain, func(int, *Record) error { return nil })
	if infos[0].Header.Target != nil {
		t.Fatalf("Create states a target: %+v", infos[0].Header.Target)
	}
	for _, bad := range []*Capabilities{{Driver: "x", Actions: []string{"teleport"}}, {Actions: []string{"history"}}} {
		if _, err := CreateWith(t.TempDir(), Options{RunID: "b", Shards: 1, Target: bad}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("target %+v: %v", bad, err)
		}
	}
}

// TestUnknownExtendedKind: a record of an extended kind this reader does
// not know (written by a later producer) is read past and counted, and the
// records around it read as written.
func TestUnknownExtendedKind(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, "x", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	s := l.Shard(0)
	s.Cursor(Cursor{Dev: 1, Seq: 5, Status: Accepted, At: time.Second})
	s.mu.Lock()
	s.ext(Kind(99), []byte{1, 2, 3, 200, 1})
	s.mu.Unlock()
	dr := DelRange{ConvID: 7, From: 3, To: 9, At: 2 * time.Second}
	s.DelRange(dr)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []Record
	infos, err := ReadDir(dir, func(_ int, r *Record) error { got = append(got, *r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !infos[0].Closed || infos[0].Records != 3 || len(got) != 2 || got[0].Kind != KindCursor || got[1].Kind != KindDelRange || got[1].DelRange != dr {
		t.Fatalf("info %+v records %+v", infos[0], got)
	}
}

// TestPageLimits: pages and slots past their bounds are errors and write
// nothing.
func TestPageLimits(t *testing.T) {
	l, err := Create(t.TempDir(), "r", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := l.Shard(0)
	if err := s.ConvPull(ConvPull{Items: make([]PulledItem, MaxPageItems+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if err := s.HistoryPage(HistoryPage{Items: make([]PageItem, MaxPageItems+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if err := s.Slot(Slot{DelList: make([]uint64, MaxDelList+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if s.n != 0 {
		t.Fatalf("%d records written", s.n)
	}
}
