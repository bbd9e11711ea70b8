package runpage

import (
	"strings"
	"testing"

	"imlab/result"
)

// A run whose server process ran inside the runner (redis-wipe's "all",
// exec: false: the result.json that run wrote) says in its generator_cpu
// row that the figure is the runner process's, names what ran inside it
// and that the generator's own share is not separable; a generator alone
// keeps the plain wording.
func TestLabCPUInProcess(t *testing.T) {
	res, err := result.ReadResult("testdata/redis-wipe.result.json")
	if err != nil {
		t.Fatal(err)
	}
	got := settingRow(HTMLReport(res).Settings, "generator_cpu")
	if !strings.HasPrefix(got, "the runner process (the generator and, inside it, all[all]) used ") ||
		!strings.HasSuffix(got, "on 2 CPUs): the generator's own share is not separable") {
		t.Fatalf("generator_cpu %q", got)
	}
	res.LabCPU.InProcess = nil
	if got := settingRow(HTMLReport(res).Settings, "generator_cpu"); !strings.HasPrefix(got, "generator used ") || strings.Contains(got, "separable") {
		t.Fatalf("a generator alone: generator_cpu %q", got)
	}
}

// settingRow is the value of the page's named settings row ("" without it).
func settingRow(rows [][2]string, name string) string {
	for _, kv := range rows {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}
