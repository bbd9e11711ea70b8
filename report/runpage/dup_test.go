package runpage

import (
	"bytes"
	"strings"
	"testing"

	"imlab/checker"
	"imlab/expect"
	"imlab/report"
)

// TestDuplicatedSaysWhatItCounts: the checker's duplicated finding counts
// extra copies (4275 of them) of fewer distinct msg_ids (3869), as the
// runner records it (expect.Findings); the page says "4275 extra copies of
// 3869 msg_ids", so the listed msg_ids are not taken for the count.
func TestDuplicatedSaysWhatItCounts(t *testing.T) {
	ids := make([]uint64, 3869)
	for i := range ids {
		ids[i] = uint64(3_869_000 + i)
	}
	res := sampleResult()
	res.Findings = expect.Findings(&checker.Verdict{Valid: true, Findings: map[string]*checker.Finding{checker.Duplicated: {Name: checker.Duplicated, Count: 4275, MsgIDs: ids}}})
	var b bytes.Buffer
	if err := report.WriteHTML(&b, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "4275 extra copies of 3869 msg_ids") != 2 {
		t.Fatal("the page's findings line and table do not both say what the duplicated count counts")
	}
}
