package runpage

import (
	"bytes"
	"html"
	"regexp"
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
	// 20 msg_ids are listed; the rest of the 3869 (not of the 4275 copies)
	// are "+3849 more".
	if !strings.Contains(b.String(), "+3849 more") || strings.Contains(b.String(), "+4255 more") {
		t.Fatal("the msg_ids not listed are not counted as msg_ids (want +3849 more)")
	}
	// A result from before the distinct count was recorded: only the
	// listed ids are known, never the copies taken for msg_ids.
	old := sampleResult()
	old.Findings = expect.Findings(&checker.Verdict{Valid: true, Findings: map[string]*checker.Finding{checker.Duplicated: {Name: checker.Duplicated, Count: 245, MsgIDs: ids[:173]}}})
	for i := range old.Findings {
		old.Findings[i].Messages = 0
	}
	b.Reset()
	if err := report.WriteHTML(&b, HTMLReport(old)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "+153 more") || strings.Contains(b.String(), "+225 more") {
		t.Fatal("an older result's duplicated msg_ids not listed are not counted from the ids (want +153 more)")
	}
}

// TestDuplicatedAllowedInTextAndPage: a verdict with duplicated copies, as
// the checker prints it (imlab check) and as the run's page draws it, says
// beside duplicated, in the same words, that it does not decide the verdict.
func TestDuplicatedAllowedInTextAndPage(t *testing.T) {
	v := &checker.Verdict{Valid: true, Findings: map[string]*checker.Finding{
		checker.Duplicated: {Name: checker.Duplicated, Count: 3, MsgIDs: []uint64{101}},
		checker.Lost:       {Name: checker.Lost, Decides: true},
	}}
	var text bytes.Buffer
	v.WriteTable(&text)
	lines := strings.Split(text.String(), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, checker.Duplicated+" ") {
			at = i
		}
	}
	if at < 0 || at+1 >= len(lines) || !strings.Contains(lines[at+1], "allowed: does not decide the verdict") {
		t.Fatalf("the text's duplicated row does not say it is allowed:\n%s", text.String())
	}
	if strings.Count(text.String(), "allowed:") != 1 {
		t.Errorf("only the duplicated row is allowed:\n%s", text.String())
	}
	res := sampleResult()
	res.Findings = expect.Findings(v)
	var page bytes.Buffer
	if err := report.WriteHTML(&page, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	said := regexp.MustCompile(`allowed: does not decide the verdict[^<]*`).FindString(page.String())
	if said == "" || !strings.Contains(lines[at+1], html.UnescapeString(said)) {
		t.Errorf("the page says %q, the text %q", said, lines[at+1])
	}
}
