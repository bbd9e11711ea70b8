package history

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"imlab/ref/model"
)

func rawOf(t *testing.T, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return bson.RawValue{Type: typ, Value: data}
}

// The seed's IsFull indexed msgs[len-1] and panicked on an empty array.
func TestIsFullEmptyAndShort(t *testing.T) {
	var nilBucket *Bucket
	if nilBucket.IsFull() {
		t.Error("nil bucket full")
	}
	empty := &Bucket{Size: 100}
	if empty.IsFull() || empty.LastSeq() != 0 {
		t.Error("empty bucket full or has a last seq")
	}
	short := &Bucket{Size: 100, Slots: []Slot{{Seq: 1, State: SlotFilled}}}
	if short.IsFull() {
		t.Error("short bucket full")
	}
	if short.LastSeq() != 1 {
		t.Errorf("short LastSeq = %d", short.LastSeq())
	}
	l := Layout{Size: 100}
	if sl := short.slotAt(l, 85); sl.State != SlotEmpty || sl.Seq != 86 {
		t.Errorf("slotAt past a short array = %+v", sl)
	}
	full := &Bucket{Idx: 1, Size: 3, Slots: []Slot{{Seq: 4}, {Seq: 5}, {Seq: 6, State: SlotPurged}}}
	if !full.IsFull() || full.LastSeq() != 6 {
		t.Errorf("full: IsFull %v LastSeq %d", full.IsFull(), full.LastSeq())
	}
	notFull := &Bucket{Size: 3, Slots: []Slot{{Seq: 1, State: SlotFilled}, {Seq: 2, State: SlotFilled}, {Seq: 3}}}
	if notFull.IsFull() || notFull.LastSeq() != 2 {
		t.Errorf("notFull: IsFull %v LastSeq %d", notFull.IsFull(), notFull.LastSeq())
	}
	// decodeBucket on a document whose array is empty or short.
	b, err := decodeBucket(l, 7, &bucketDoc{ID: "7:0"})
	if err != nil || b.IsFull() || len(b.Slots) != 0 {
		t.Errorf("decode empty: %+v %v", b, err)
	}
}

// The seed kept is_read twice (slot and inner message). Here it exists on
// the slot only.
func TestIsReadStoredOnce(t *testing.T) {
	d := emptySlotDoc()
	d.Msg = toMsgDoc(model.Message{MsgID: 1, ConvID: 7, ConvType: model.ConvGroup, ConvSeq: 3, SenderUID: 2, Content: "x", CreatedAt: time.Now()})
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bson.Raw(raw).LookupErr("is_read"); err != nil {
		t.Errorf("slot lacks is_read: %v", err)
	}
	if _, err := bson.Raw(raw).LookupErr("msg", "is_read"); err == nil {
		t.Error("message carries its own is_read")
	}
	elems, _ := bson.Raw(raw).Elements()
	n := 0
	for _, e := range elems {
		if e.Key() == "is_read" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("is_read appears %d times", n)
	}
}

func TestDecodeSlot(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	d := emptySlotDoc()
	d.Msg = toMsgDoc(model.Message{MsgID: 1<<62 + 5, ConvID: 7, ConvType: model.ConvGroup, ConvSeq: 42, SenderUID: 3, ClientMsgID: "c", Content: "hi", CreatedAt: at})
	d.DelList = []int64{4, 5}
	d.Revoke = &revokeDoc{UserID: 3, Role: roleSender, Time: at.UnixMilli()}
	d.V = 9
	sl, err := decodeSlot(7, 42, rawOf(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if sl.State != SlotFilled || sl.Msg.MsgID != 1<<62+5 || sl.Msg.ConvID != 7 || !sl.Msg.CreatedAt.Equal(at) ||
		sl.Version != 9 || !sl.DeletedBy(5) || sl.DeletedBy(6) || sl.Revoke == nil || sl.Revoke.UserID != 3 {
		t.Errorf("decoded %+v msg %+v", sl, sl.Msg)
	}
	if _, err := decodeSlot(7, 43, rawOf(t, d)); err == nil {
		t.Error("a slot holding another seq decoded without error")
	}
	if sl, err := decodeSlot(7, 1, rawOf(t, purgedMarker)); err != nil || sl.State != SlotPurged {
		t.Errorf("purged: %+v %v", sl, err)
	}
	if sl, err := decodeSlot(7, 1, bson.RawValue{Type: bson.TypeNull}); err != nil || sl.State != SlotEmpty {
		t.Errorf("null: %+v %v", sl, err)
	}
	if sl, err := decodeSlot(7, 1, bson.RawValue{}); err != nil || sl.State != SlotEmpty {
		t.Errorf("absent: %+v %v", sl, err)
	}
	if sl, err := decodeSlot(7, 1, rawOf(t, emptySlotDoc())); err != nil || sl.State != SlotEmpty {
		t.Errorf("pre-filled: %+v %v", sl, err)
	}
	if _, err := decodeSlot(7, 1, rawOf(t, int32(5))); err == nil {
		t.Error("an int slot decoded without error")
	}
}

func TestNativePipelineShape(t *testing.T) {
	p := nativePipeline("7:3", []int{85, 86, 99})
	want := `[{"$match":{"_id":"7:3"}},{"$project":{"_id":0,"max_seq":1,"msgs":{"$map":{"input":[85,86,99],"as":"i","in":{"$arrayElemAt":["$msgs","$$i"]}}}}}]`
	got := ""
	for i, stage := range p {
		b, err := bson.MarshalExtJSON(stage, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			got += ","
		}
		got += string(b)
	}
	got = "[" + got + "]"
	if got != want {
		t.Errorf("pipeline\n got %s\nwant %s", got, want)
	}
}

func TestDecodeNative(t *testing.T) {
	g := DocSeqs{Idx: 0, DocID: "7:0", Seqs: []uint64{5, 6, 7}, Slots: []int{4, 5, 6}}
	r, err := decodeNative(7, g, nil)
	if err != nil || r.exists || len(r.slots) != 3 || r.slots[2].Seq != 7 || r.slots[2].State != SlotEmpty {
		t.Fatalf("no document: %+v %v", r, err)
	}
	d := emptySlotDoc()
	d.Msg = toMsgDoc(model.Message{MsgID: 11, ConvID: 7, ConvType: model.ConvGroup, ConvSeq: 5, SenderUID: 1, CreatedAt: time.Now()})
	// A short answer (only the first element) must not panic.
	r, err = decodeNative(7, g, []nativeDoc{{MaxSeq: 5, Msgs: []bson.RawValue{rawOf(t, d)}}})
	if err != nil || !r.exists || r.maxSeq != 5 || r.slots[0].State != SlotFilled || r.slots[1].State != SlotEmpty {
		t.Fatalf("short answer: %+v %v", r, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"prefix":  func(c *Config) { c.CollectionPrefix = "" },
		"size0":   func(c *Config) { c.BucketSize = 0 },
		"sizeBig": func(c *Config) { c.BucketSize = MaxBucketSize + 1 },
		"mode":    func(c *Config) { c.ReadMode = "fast" },
		"range":   func(c *Config) { c.MaxRange = 0 },
		"del":     func(c *Config) { c.DelListMax = 0 },
		"window":  func(c *Config) { c.RevokeWindow = 0 },
		"ttl":     func(c *Config) { c.CacheTTL = 0 },
		"conc":    func(c *Config) { c.WriteConcurrency = 0 },
		"batch":   func(c *Config) { c.MaxBatch = 0 },
		"wtime":   func(c *Config) { c.WriteTimeout = 0 },
		"hold":    func(c *Config) { c.UnknownHold = 0 },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
