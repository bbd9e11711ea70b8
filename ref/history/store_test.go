package history

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"imlab/ref/model"
)

const testGroup = uint64(4242)

// msgsFor builds messages seq from..to of conv (group unless conv is 1:1),
// sender alternating between a and b.
func msgsFor(conv uint64, from, to uint64, a, b uint64) []model.Message {
	t, _, _, _ := model.ParseConvID(conv)
	base := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	var out []model.Message
	for seq := from; seq <= to; seq++ {
		sender := a
		if seq%2 == 0 {
			sender = b
		}
		out = append(out, model.Message{
			MsgID: conv%1000*1_000_000 + seq, ConvID: conv, ConvType: t, ConvSeq: seq, SenderUID: sender,
			ClientMsgID: fmt.Sprintf("c-%d", seq), Content: fmt.Sprintf("m%d", seq), CreatedAt: base,
		})
	}
	return out
}

func rawBucket(t *testing.T, s *Store, id string) bucketDoc {
	t.Helper()
	var d bucketDoc
	if err := s.msgs.FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		t.Fatalf("find %s: %v", id, err)
	}
	return d
}

// rawBuckets reads conv's first n buckets as stored, by document id.
func rawBuckets(t *testing.T, s *Store, conv uint64, n int) map[string]bucketDoc {
	t.Helper()
	out := make(map[string]bucketDoc, n)
	for idx := range uint64(n) {
		id := DocIDOf(conv, idx)
		out[id] = rawBucket(t, s, id)
	}
	return out
}

// checkBucketsUnchanged fails t for each bucket of before that s stores
// otherwise now; what names the step that must have changed nothing.
func checkBucketsUnchanged(t *testing.T, s *Store, before map[string]bucketDoc, what string) {
	t.Helper()
	for id, b := range before {
		if a := rawBucket(t, s, id); !reflect.DeepEqual(a, b) {
			t.Errorf("%s changed %s", what, id)
		}
	}
}

func TestWriteInsertsWholeDocumentsAndReadsBack(t *testing.T) {
	ctx := context.Background()
	s, cc := countedStore(t)
	msgs := msgsFor(testGroup, 1, 250, 1, 2)
	// A whole insert per bucket: the batch opens bucket 0 at its first slot
	// (no update is tried first), and after an insert the following
	// buckets are inserted directly.
	if u, i := cc.write(t, s, msgs); u != 0 || i != 3 {
		t.Errorf("fresh batch: %d updates, %d inserts; want 0 and 3", u, i)
	}
	for idx, wantMax := range []int64{100, 200, 250} {
		d := rawBucket(t, s, DocIDOf(testGroup, uint64(idx)))
		if len(d.Msgs) != 100 {
			t.Errorf("bucket %d has %d slots", idx, len(d.Msgs))
		}
		if d.MaxSeq != wantMax || d.ConvID != "4242" || d.Idx != int64(idx) {
			t.Errorf("bucket %d: max_seq %d conv %s idx %d", idx, d.MaxSeq, d.ConvID, d.Idx)
		}
		for i, v := range d.Msgs {
			if v.Type != bson.TypeEmbeddedDocument {
				t.Fatalf("bucket %d slot %d is %s, not a pre-filled document", idx, i, v.Type)
			}
		}
	}
	rr, err := s.ReadSlots(ctx, testGroup, []uint64{1, 99, 100, 101, 250, 251, 300})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 99, 100, 101, 250} {
		sl := rr.Slots[seq]
		if sl.State != SlotFilled || sl.Msg.ConvSeq != seq || sl.Msg.Content != fmt.Sprintf("m%d", seq) || sl.Msg.ConvID != testGroup {
			t.Errorf("seq %d: %+v", seq, sl)
		}
	}
	if rr.Slots[251].State != SlotEmpty || rr.Slots[300].State != SlotEmpty {
		t.Error("unwritten seqs read as filled")
	}
	if rr.Known != 250 {
		t.Errorf("Known = %d, want 250", rr.Known)
	}
	if want := map[bool]string{true: ReadFallback, false: ReadNative}[onFerret]; s.ReadPath() != want {
		t.Errorf("auto mode: read path %s, want %s (FerretDB: %v)", s.ReadPath(), want, onFerret)
	}
	if n, err := s.MaxStoredSeq(ctx, testGroup); err != nil || n != 250 {
		t.Errorf("MaxStoredSeq = %d, %v", n, err)
	}
}

func TestReplayIsOneUpdatePerBucketAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, cc := countedStore(t)
	msgs := msgsFor(testGroup, 1, 250, 1, 2)
	if err := s.WriteBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	before := rawBuckets(t, s, testGroup, 3)
	if u, i := cc.write(t, s, msgs); u != 3 || i != 0 {
		t.Errorf("replay: %d updates, %d inserts; want 3 and 0", u, i)
	}
	checkBucketsUnchanged(t, s, before, "replay")
	// A later batch filling the same bucket is one update too.
	if u, i := cc.write(t, s, msgsFor(testGroup, 251, 260, 1, 2)); u != 1 || i != 0 {
		t.Errorf("append to bucket: %d updates, %d inserts; want 1 and 0", u, i)
	}
}

func TestConcurrentWritersRaceToCreate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newDB(t, nil), nil)
	all := msgsFor(testGroup, 1, 150, 1, 2)
	const writers = 6
	var wg sync.WaitGroup
	errs := make([]error, writers)
	start := make(chan struct{})
	for w := 0; w < writers; w++ {
		// Each writer has its own interleaved share plus the whole of
		// seqs 1..10 (overlap, as a redelivery would).
		var mine []model.Message
		for i, m := range all {
			if i%writers == w || m.ConvSeq <= 10 {
				mine = append(mine, m)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[w] = s.WriteBatch(ctx, mine)
		}()
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", w, err)
		}
	}
	seqs := make([]uint64, 0, 150)
	for seq := uint64(1); seq <= 150; seq++ {
		seqs = append(seqs, seq)
	}
	rr, err := s.ReadSlots(ctx, testGroup, seqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range seqs {
		if sl := rr.Slots[seq]; sl.State != SlotFilled || sl.Msg.MsgID != all[seq-1].MsgID {
			t.Errorf("seq %d lost in the race: %+v", seq, sl)
		}
	}
	n, err := s.msgs.CountDocuments(ctx, bson.D{})
	if err != nil || n != 2 {
		t.Errorf("documents = %d, %v; want 2", n, err)
	}
}

func TestWriteBatchRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newDB(t, nil), nil)
	good := msgsFor(testGroup, 1, 3, 1, 2)
	cases := map[string]func([]model.Message) []model.Message{
		"seq0":     func(m []model.Message) []model.Message { m[1].ConvSeq = 0; return m },
		"conv0":    func(m []model.Message) []model.Message { m[1].ConvID = 0; return m },
		"type":     func(m []model.Message) []model.Message { m[1].ConvType = model.ConvSingle; return m },
		"msgid0":   func(m []model.Message) []model.Message { m[1].MsgID = 0; return m },
		"sender0":  func(m []model.Message) []model.Message { m[1].SenderUID = 0; return m },
		"conflict": func(m []model.Message) []model.Message { d := m[0]; d.MsgID++; return append(m, d) },
		"time0":    func(m []model.Message) []model.Message { m[1].CreatedAt = time.Time{}; return m },
		"toolong": func(m []model.Message) []model.Message {
			m[1].Content = strings.Repeat("x", model.MaxContentLen+1)
			return m
		},
	}
	for name, mut := range cases {
		batch := mut(append([]model.Message(nil), good...))
		err := s.WriteBatch(ctx, batch)
		if !errors.Is(err, model.ErrInvalid) && !errors.Is(err, model.ErrConflict) && !errors.Is(err, model.ErrTooLarge) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if n, _ := s.msgs.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Errorf("refused batches wrote %d documents", n)
	}
	small := newStore(t, newDB(t, nil), func(c *Config) { c.MaxBatch = 2 })
	if err := small.WriteBatch(ctx, good); !errors.Is(err, model.ErrTooLarge) {
		t.Errorf("oversized batch: %v", err)
	}
	// The same message twice in one batch is fine (a redelivery).
	if err := s.WriteBatch(ctx, append(good, good[0])); err != nil {
		t.Errorf("duplicate message in batch: %v", err)
	}
	// An unset conv_type is derived from the conv_id.
	untyped := msgsFor(testGroup, 4, 4, 1, 2)
	untyped[0].ConvType = 0
	if err := s.WriteBatch(ctx, untyped); err != nil {
		t.Fatal(err)
	}
	if sl, err := s.loadSlot(ctx, testGroup, 4); err != nil || sl.Msg == nil || sl.Msg.ConvType != model.ConvGroup {
		t.Errorf("derived conv_type: %+v %v", sl.Msg, err)
	}
}

func TestBucketSizeRecordedAndChangeRefused(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, nil)
	s := newStore(t, db, nil)
	if err := s.WriteBatch(ctx, msgsFor(testGroup, 1, 5, 1, 2)); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.BucketSize = 500
	if _, err := New(ctx, db, cfg); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("size change accepted: %v", err)
	}
	if _, err := New(ctx, db, DefaultConfig()); err != nil {
		t.Fatalf("same size refused: %v", err)
	}
	// Data written before the record existed: its array length decides.
	if _, err := s.meta.DeleteMany(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	cfg.BucketSize = 50
	if _, err := New(ctx, db, cfg); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("size change on unrecorded data accepted: %v", err)
	}
	// An empty database records whatever it is given.
	other := newDB(t, nil)
	if _, err := New(ctx, other, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, other, DefaultConfig()); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second size on a fresh database accepted: %v", err)
	}
}

func TestPurgeSurvivesReplay(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newDB(t, nil), nil)
	msgs := msgsFor(testGroup, 1, 20, 1, 2)
	if err := s.WriteBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := s.purge(ctx, testGroup, 7); err != nil {
		t.Fatal(err)
	}
	// Purge ahead of the write: seq 150 is not written yet.
	if err := s.purge(ctx, testGroup, 150); err != nil {
		t.Fatal(err)
	}
	if err := s.purge(ctx, testGroup, 7); err != nil { // idempotent
		t.Fatal(err)
	}
	// Replays of the whole range, including the purged seqs.
	if err := s.WriteBatch(ctx, append(msgs, msgsFor(testGroup, 140, 160, 1, 2)...)); err != nil {
		t.Fatal(err)
	}
	rr, err := s.ReadSlots(ctx, testGroup, []uint64{6, 7, 8, 149, 150, 151})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Slots[7].State != SlotPurged || rr.Slots[150].State != SlotPurged {
		t.Errorf("purged slots came back: 7=%+v 150=%+v", rr.Slots[7], rr.Slots[150])
	}
	for _, seq := range []uint64{6, 8, 149, 151} {
		if rr.Slots[seq].State != SlotFilled {
			t.Errorf("seq %d next to a purge not written: %+v", seq, rr.Slots[seq])
		}
	}
	d := rawBucket(t, s, DocIDOf(testGroup, 0))
	if str, ok := d.Msgs[6].StringValueOK(); !ok || str != purgedMarker {
		t.Errorf("stored slot 6 = %v", d.Msgs[6])
	}
}

func TestReadModes(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, nil)
	s := newStore(t, db, func(c *Config) { c.ReadMode = ReadFallback })
	if err := s.WriteBatch(ctx, msgsFor(testGroup, 1, 10, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if s.ReadPath() != ReadFallback {
		t.Error("fallback mode reports native")
	}
	rr, err := s.ReadSlots(ctx, testGroup, []uint64{3, 10, 11})
	if err != nil || rr.Slots[3].State != SlotFilled || rr.Slots[10].State != SlotFilled || rr.Slots[11].State != SlotEmpty {
		t.Fatalf("fallback: %+v %v", rr.Slots, err)
	}
	native := newStore(t, db, func(c *Config) { c.ReadMode = ReadNative })
	rr, err = native.ReadSlots(ctx, testGroup, []uint64{3, 10, 11})
	if onFerret {
		if !errors.Is(err, model.ErrUnavailable) || !hasCode(err, codeNotImplemented) {
			t.Errorf("native on FerretDB: err = %v, want NotImplemented", err)
		}
	} else if err != nil || rr.Slots[3].State != SlotFilled || rr.Slots[10].State != SlotFilled || rr.Slots[11].State != SlotEmpty || rr.Known != 10 {
		t.Errorf("native on MongoDB: %+v known %d, %v", rr.Slots, rr.Known, err)
	}
	if native.ReadPath() != ReadNative {
		t.Error("native mode switched itself")
	}
	auto := newStore(t, db, nil)
	if auto.ReadPath() != ReadNative {
		t.Error("auto did not start native")
	}
	rr, err = auto.ReadSlots(ctx, testGroup, []uint64{3})
	if err != nil || rr.Slots[3].State != SlotFilled {
		t.Fatalf("auto: %+v %v", rr.Slots[3], err)
	}
	if onFerret && auto.ReadPath() != ReadFallback {
		t.Error("auto did not switch to fallback after NotImplemented")
	}
	if !onFerret && auto.ReadPath() != ReadNative {
		t.Error("auto left the native path on MongoDB")
	}
}

func TestShortOrEmptyDocumentDoesNotPanic(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newDB(t, nil), nil)
	// Documents that break the fixed-size contract (hand-made, or written
	// by a broken tool): an empty array and a 1-element array.
	for idx, n := range []int{0, 1} {
		slots := make([]any, n)
		for i := range slots {
			slots[i] = emptySlotDoc()
		}
		if _, err := s.msgs.InsertOne(ctx, bson.D{
			{Key: "_id", Value: DocIDOf(testGroup, uint64(idx))}, {Key: "conv_id", Value: "4242"},
			{Key: "idx", Value: int64(idx)}, {Key: "max_seq", Value: int64(0)}, {Key: "msgs", Value: slots},
		}); err != nil {
			t.Fatal(err)
		}
	}
	rr, err := s.ReadSlots(ctx, testGroup, []uint64{1, 86, 101, 186})
	if err != nil {
		t.Fatal(err)
	}
	for seq, sl := range rr.Slots {
		if sl.State != SlotEmpty {
			t.Errorf("seq %d: %+v", seq, sl)
		}
	}
	if n, err := s.MaxStoredSeq(ctx, testGroup); err != nil || n != 0 {
		t.Errorf("MaxStoredSeq on short docs = %d, %v", n, err)
	}
}

// A writer whose update misses and whose insert then hits a duplicate key
// (another writer created the document in between) steps back and updates:
// both writers' messages end up stored.
func TestDuplicateKeyStepsBackToUpdate(t *testing.T) {
	ctx := context.Background()
	var cc cmdCounter
	db := newDB(t, cc.monitor())
	s := newStore(t, db, nil)
	rival := newStore(t, db, nil)
	rivalMsgs := msgsFor(testGroup, 1, 3, 1, 2)
	fired := 0
	s.beforeInsert = func(docID string) {
		if fired > 0 {
			return
		}
		fired++
		if err := rival.WriteBatch(ctx, rivalMsgs); err != nil {
			t.Errorf("rival: %v", err)
		}
	}
	mine := msgsFor(testGroup, 4, 8, 1, 2)
	cc.reset()
	if err := s.WriteBatch(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if fired != 1 {
		t.Fatalf("hook fired %d times", fired)
	}
	// mine: update (miss), insert (dup), update (hit); rival: insert (its
	// batch opens the bucket at its first slot).
	if u, i := cc.get("update"), cc.get("insert"); u != 2 || i != 2 {
		t.Errorf("%d updates, %d inserts; want 2 and 2", u, i)
	}
	rr, err := s.ReadSlots(ctx, testGroup, []uint64{1, 2, 3, 4, 5, 6, 7, 8})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 8; seq++ {
		if rr.Slots[seq].State != SlotFilled {
			t.Errorf("seq %d missing", seq)
		}
	}
	if rr.Known != 8 {
		t.Errorf("Known = %d", rr.Known)
	}
}

// Two independent Stores (as two processes would) race to create the same
// buckets; each writes each bucket once, so whoever loses the insert
// updates a document that already holds the winner's slots.
func TestTwoStoresRaceToCreate(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, nil)
	a, b := newStore(t, db, nil), newStore(t, db, nil)
	for round := uint64(0); round < 3; round++ {
		conv := testGroup + round
		all := msgsFor(conv, 1, 300, 1, 2)
		var odd, even []model.Message
		for _, m := range all {
			if m.ConvSeq%2 == 1 {
				odd = append(odd, m)
			} else {
				even = append(even, m)
			}
		}
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, p := range []struct {
			s *Store
			m []model.Message
		}{{a, odd}, {b, even}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = p.s.WriteBatch(ctx, p.m)
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		seqs := make([]uint64, 300)
		for i := range seqs {
			seqs[i] = uint64(i + 1)
		}
		for _, chunk := range [][]uint64{seqs[:100], seqs[100:200], seqs[200:]} {
			rr, err := a.ReadSlots(ctx, conv, chunk)
			if err != nil {
				t.Fatal(err)
			}
			for _, seq := range chunk {
				if rr.Slots[seq].State != SlotFilled {
					t.Errorf("round %d: seq %d lost", round, seq)
				}
			}
		}
	}
}

// A write landing between the document reads of one ReadSlots (the
// history tier writing in conv_seq order while a page spanning two buckets
// is read) leaves at most the newest seqs out, never a hole below a seq
// the answer shows.
func TestReadSlotsNoHoleAcrossBuckets(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, nil)
	s := newStore(t, db, nil)
	if err := s.WriteBatch(ctx, msgsFor(testGroup, 1, 95, 1, 2)); err != nil {
		t.Fatal(err)
	}
	fired := 0
	s.afterDocRead = func(uint64) {
		if fired > 0 {
			return
		}
		fired++
		if err := s.WriteBatch(ctx, msgsFor(testGroup, 96, 110, 1, 2)); err != nil {
			t.Errorf("write between the reads: %v", err)
		}
	}
	var seqs []uint64
	for seq := uint64(90); seq <= 110; seq++ {
		seqs = append(seqs, seq)
	}
	rr, err := s.ReadSlots(ctx, testGroup, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if fired != 1 {
		t.Fatalf("hook fired %d times", fired)
	}
	top := uint64(0)
	for _, seq := range seqs {
		if rr.Slots[seq].State == SlotFilled {
			top = seq
		}
	}
	for seq := uint64(90); seq < top; seq++ {
		if rr.Slots[seq].State != SlotFilled {
			t.Errorf("seq %d missing below seq %d, which the answer shows", seq, top)
		}
	}
}
