package result

import (
	"reflect"
	"testing"

	"imlab/ref/server"
)

func TestAccountDeadLetters(t *testing.T) {
	route := &server.DeadLettersAnswer{Topic: "dlq", FanoutTopic: "fan", InboxGroup: "in", HistoryGroup: "hi", TransientWindowMS: 1500, LabShortWindow: true,
		Records: 3, Letters: []server.DeadLetterAnswer{
			{Partition: 0, Offset: 0, Group: "in", Class: "transient", MsgID: 10, RetriedMS: 1600, WindowMS: 1500},
			{Partition: 0, Offset: 1, Group: "in", Class: "transient", MsgID: 11, RetriedMS: 700, WindowMS: 1500},
			{Partition: 2, Offset: 0, Group: "hi", Class: "permanent", MsgID: 12},
		}}
	topic := []TopicLetter{
		{Partition: 0, Offset: 0, Group: "in", Class: "transient", MsgID: 10, RetriedMS: 1600, WindowMS: 1500},
		{Partition: 0, Offset: 1, Group: "in", Class: "transient", MsgID: 11, RetriedMS: 700, WindowMS: 1500},
		{Partition: 2, Offset: 0, Group: "hi", Class: "permanent", MsgID: 12, RetriedMS: 0, WindowMS: 1500},
	}
	queued := map[uint64]bool{10: true, 11: true, 12: true, 20: true, 21: true}
	in := DeadLetterInput{Route: route, Topic: topic, TopicRecords: 3, Queued: queued,
		Repaired: []uint64{10, 20, 30}, Lost: []uint64{11, 21}, Ledger: true}
	s := AccountDeadLetters(in)
	want := DeadLetterSummary{Known: true, Topic: "dlq", Records: 3, Listed: 3, Inbox: 2, History: 1, Transient: 2, Permanent: 1,
		WindowMS: 1500, LabShortWindow: true, Early: []DeadLetterRef{{Partition: 0, Offset: 1, MsgID: 11, RetriedMS: 700, WindowMS: 1500}},
		MsgIDs: []uint64{10, 11}, Repaired: 1, LostIDs: []uint64{11}, Queued: 5, Unaccounted: []uint64{20, 21}, NeverQueued: 1, UnaccountedLost: 1}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("summary\n got %+v\nwant %+v", s, want)
	}

	// The route and the topic disagree: a letter the server lists that the
	// topic lacks, one the topic holds that the server does not list.
	in.Topic = []TopicLetter{topic[0], topic[2], {Partition: 5, Offset: 0, Group: "in", Class: "transient", MsgID: 13, RetriedMS: 2000, WindowMS: 1500}}
	s = AccountDeadLetters(in)
	if len(s.Mismatch) != 2 || !s.Known {
		t.Fatalf("mismatch %q (known %v); want two differences", s.Mismatch, s.Known)
	}

	// A route or topic that could not be read makes the summary unknown.
	for _, bad := range []DeadLetterInput{{RouteErr: "503"}, {Route: route, TopicErr: "no broker"}, {Route: route, QueuedErr: "no broker"},
		{Route: route, Topic: topic[:1], TopicRecords: 3}} {
		if s := AccountDeadLetters(bad); s.Known || len(s.Errors) == 0 {
			t.Fatalf("%+v: known %v, errors %q", bad, s.Known, s.Errors)
		}
	}
	// Without a ledger nothing is said of fates.
	s = AccountDeadLetters(DeadLetterInput{Route: route, Topic: topic, TopicRecords: 3, Queued: queued, Repaired: []uint64{20}})
	if s.Repaired != 0 || s.LostIDs != nil || s.Unaccounted != nil {
		t.Fatalf("no ledger: %+v", s)
	}
}
