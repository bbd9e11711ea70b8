package checker

import (
	"bytes"
	"strings"
	"testing"
)

// TestDuplicatedRowSaysWhatItCounts: read from a ledger with three extra
// copies of one message, the duplicated row's count (3) is the copies, not
// the msg_ids listed beside it (1): the row says so.
func TestDuplicatedRowSaysWhatItCounts(t *testing.T) {
	w := valid()
	w.deliveries = append(w.deliveries, dl(2, 1, 101, c12, 1, 1), dl(2, 1, 101, c12, 1, 1), dl(2, 1, 101, c12, 1, 1))
	v := check(t, w)
	var b bytes.Buffer
	v.WriteTable(&b)
	var row string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, Duplicated+" ") {
			row = l
		}
	}
	if !strings.Contains(row, "(3 extra copies of 1 msg_ids) 101") {
		t.Fatalf("duplicated row %q: want the copies and the msg_ids told apart", row)
	}
}
