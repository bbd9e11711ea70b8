package model

import (
	"errors"
	"strings"
	"testing"
)

func TestSingleConvIDSymmetricAndParsable(t *testing.T) {
	for _, c := range [][2]uint64{{1, 2}, {2, 1}, {7, MaxUID}, {MaxUID - 1, MaxUID}} {
		a, err := SingleConvID(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		b, err := SingleConvID(c[1], c[0])
		if err != nil || a != b {
			t.Fatalf("%v: %d vs %d (%v)", c, a, b, err)
		}
		typ, x, y, err := ParseConvID(a)
		lo, hi := min(c[0], c[1]), max(c[0], c[1])
		if err != nil || typ != ConvSingle || x != lo || y != hi {
			t.Fatalf("parse %d: %v %d %d %v", a, typ, x, y, err)
		}
		if g, _ := GroupConvID(1); g == a {
			t.Fatal("1:1 id collides with a group id")
		}
	}
}

func TestSingleConvIDRefusals(t *testing.T) {
	for _, c := range [][2]uint64{{0, 1}, {1, 0}, {3, 3}, {1, MaxUID + 1}} {
		if _, err := SingleConvID(c[0], c[1]); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%v: %v", c, err)
		}
	}
}

func TestGroupConvID(t *testing.T) {
	if id, err := GroupConvID(7); err != nil || id != 7 {
		t.Fatal(id, err)
	}
	for _, g := range []uint64{0, MaxGroupID + 1} {
		if _, err := GroupConvID(g); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%d: %v", g, err)
		}
	}
	typ, a, _, err := ParseConvID(MaxGroupID)
	if err != nil || typ != ConvGroup || a != MaxGroupID {
		t.Fatal(typ, a, err)
	}
	for _, bad := range []uint64{0, singleBit, singleBit | 5<<31 | 5, singleBit | 9<<31 | 3} {
		if _, _, _, err := ParseConvID(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%x parsed: %v", bad, err)
		}
	}
}

func TestSendRequestValidate(t *testing.T) {
	ok := SendRequest{SenderUID: 1, ClientMsgID: "c", ConvType: ConvSingle, ToUID: 2, Content: "hi"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if id, _ := SingleConvID(1, 2); ok.ConvID() != id {
		t.Fatal("ConvID")
	}
	grp := SendRequest{SenderUID: 1, ClientMsgID: "c", ConvType: ConvGroup, GroupID: 9}
	if err := grp.Validate(); err != nil || grp.ConvID() != 9 {
		t.Fatal(err)
	}
	cases := map[string]struct {
		mut  func(*SendRequest)
		want error
	}{
		"no sender":      {func(r *SendRequest) { r.SenderUID = 0 }, ErrInvalid},
		"no client id":   {func(r *SendRequest) { r.ClientMsgID = "" }, ErrInvalid},
		"long client id": {func(r *SendRequest) { r.ClientMsgID = strings.Repeat("x", MaxClientMsgIDLen+1) }, ErrInvalid},
		"long content":   {func(r *SendRequest) { r.Content = strings.Repeat("x", MaxContentLen+1) }, ErrTooLarge},
		"conv type 3":    {func(r *SendRequest) { r.ConvType = 3 }, ErrInvalid},
		"to self":        {func(r *SendRequest) { r.ToUID = 1 }, ErrInvalid},
		"1:1 with group": {func(r *SendRequest) { r.GroupID = 4 }, ErrInvalid},
		"group with to": {func(r *SendRequest) {
			r.ConvType = ConvGroup
			r.GroupID = 4
		}, ErrInvalid},
	}
	for name, c := range cases {
		r := ok
		c.mut(&r)
		if err := r.Validate(); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}

func TestRateLimitErrorUnwraps(t *testing.T) {
	var err error = &RateLimitError{RetryAfter: 2}
	if !errors.Is(err, ErrRateLimited) {
		t.Fatal("RateLimitError does not unwrap to ErrRateLimited")
	}
}
