package expect

import (
	"imlab/loadgen/schedule"
	"imlab/scenario"
	"path/filepath"
	"testing"
)

// TestLibraryClaims: the default glob exercises what it claims: every
// policy under at least one fault; strict under each MySQL fault and under
// a SIGKILL of an exec api process; an inbox past the hot window while
// devices are away; client retries with the same client_msg_id; every
// file that expects a valid run states the reorders it allows, and every
// one not about repair runs reconciliation late and allows no repair,
// while queue-loss-store asserts that it repaired.
func TestLibraryClaims(t *testing.T) {
	paths, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	faulted := map[string]bool{}
	strictMySQL := map[string]bool{}
	apiKill, hotWindow, retries := false, false, false
	for _, p := range paths {
		f, err := scenario.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == scenario.KindCapacity {
			continue // a search: no load of its own (TestRunCapacitySmoke)
		}
		pol := f.Server.PolicyOr()
		if len(f.Faults) > 0 {
			faulted[pol] = true
		}
		for _, x := range f.Faults {
			if pol == "strict" && x.Target == scenario.TargetMySQL {
				strictMySQL[x.Kind] = true
			}
			if pol == "strict" && x.Kind == scenario.KindKill {
				for _, pr := range f.Processes() {
					if pr.Name == x.Target && pr.RunsAPI() && pr.Exec {
						apiKill = true
					}
				}
			}
		}
		l := f.Load
		perUID := MeanRate(mustShape(t, l.Rate), l.Duration.D()) * l.Duration.D().Seconds() * 2 / float64(l.Users)
		if l.ComeBackEvery != nil && l.ComeBackEvery.D() == 0 && perUID > 200 && f.Server.UnreadThreshold == 0 {
			hotWindow = true
		}
		if l.Retries != nil && *l.Retries > 0 && l.SendTimeout > 0 && len(f.Faults) > 0 {
			retries = true
		}
		e := f.Expect
		if e.VerdictOr() != scenario.VerdictValid {
			continue
		}
		if e.MaxReordered == nil {
			t.Errorf("%s: a valid scenario must state max_reordered", p)
		}
		repair := f.Server.ReconcileGrace != 0
		if repair && e.MinRepairs == nil && f.Name == "queue-loss-store" {
			t.Errorf("%s: repair is its point: it must assert min_repairs", p)
		}
		if !repair && (e.MaxRepairs == nil || *e.MaxRepairs != 0) {
			t.Errorf("%s: reconciliation runs late here, so it must allow no repair (max_repairs: 0)", p)
		}
	}
	for _, pol := range []string{"strict", "store", "outbox", "queue"} {
		if !faulted[pol] {
			t.Errorf("no shipped scenario puts policy %s under a fault", pol)
		}
	}
	for _, k := range []string{scenario.KindLatency, scenario.KindResetPeer, scenario.KindDown} {
		if !strictMySQL[k] {
			t.Errorf("no strict scenario with MySQL fault %s", k)
		}
	}
	if !apiKill || !hotWindow || !retries {
		t.Errorf("api kill %v, hot window %v, retries %v: want all", apiKill, hotWindow, retries)
	}
}

func mustShape(t *testing.T, rate string) schedule.Shape {
	t.Helper()
	sh, err := schedule.Parse(rate)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}
