package rkeys

import "testing"

func TestSeedKeyLayout(t *testing.T) {
	k := Keys{}
	for got, want := range map[string]string{
		k.SeqCounter(42):     "im:offline:seq:42",
		k.Inbox(42):          "im:offline:inbox:42",
		k.Cursor(42, "pc"):   "im:offline:cursor:42:pc",
		k.MQDedup(9, 42):     "im:mq:dedup:9:42",
		k.HistoryMsg(7, 3):   "im:history:7:3",
		k.PushChannel(5):     "im:push:5",
		Keys{"t1:"}.Inbox(1): "t1:im:offline:inbox:1",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if (Keys{Prefix: "t1:"}).Pattern() != "t1:*" {
		t.Fatal("pattern")
	}
}
