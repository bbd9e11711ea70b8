package capacity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// namedSleeps starts two shells, each with a process of a command name
// of their own, and returns the name, the first shell's pid (the owner)
// and the pids of its process and of the other shell's.
func namedSleeps(t *testing.T, tag string) (name string, owner, own, other int) {
	t.Helper()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	name = "pgsl" + tag + strconv.Itoa(os.Getpid()%100000)
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func() (shell, pid int) {
		c := exec.Command("sh", "-c", bin+" 60 & echo $!; wait")
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(line))
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); _ = c.Wait() })
		// The shell prints the pid when it forked, before the exec.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); strings.TrimSpace(string(b)) == name {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d never ran %s", pid, name)
			}
		}
		return c.Process.Pid, pid
	}
	owner, own = start()
	_, other = start()
	return name, owner, own, other
}

// TestFindProcsPrefersTheTargetsOwn: of two processes of one name, the
// one that descends from a watched process (a shell here, as imlab up's
// private servers descend from it) is listed alone; with no owner among
// their parents, both are listed, marked found by name.
func TestFindProcsPrefersTheTargetsOwn(t *testing.T) {
	name, owner, own, other := namedSleeps(t, "a")
	got, err := FindProcs([]string{name}, []int{owner})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (Proc{Name: name, PID: own}) {
		t.Fatalf("with the owner: %+v, want only pid %d (not %d)", got, own, other)
	}
	got, err = FindProcs([]string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("without an owner: %+v, want both", got)
	}
	for _, p := range got {
		if p.Found != FoundByName || p.Name != name+":"+strconv.Itoa(p.PID)+" (by name)" {
			t.Errorf("%+v: not marked found by name", p)
		}
	}
}

// TestFoundByNameSaidEverywhere: processes found by name alone are said
// so in the table's columns and notes, result.json and report.html.
func TestFoundByNameSaidEverywhere(t *testing.T) {
	name, _, _, _ := namedSleeps(t, "b")
	found, notes, err := findNamed([]string{name}, []Proc{{Name: "server", PID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || len(notes) != 1 || !strings.HasSuffix(notes[0], ": "+ByNameNote) {
		t.Fatalf("found %+v notes %q", found, notes)
	}
	r := pageResult()
	r.Procs = append(r.Procs, found...)
	r.Notes = notes
	var text, page bytes.Buffer
	if err := r.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	col := found[0].Name + " cores"
	if !strings.Contains(text.String(), col) || !strings.Contains(text.String(), ByNameNote) {
		t.Errorf("text lacks %q or the note:\n%s", col, text.String())
	}
	if !strings.Contains(page.String(), "(by name) pid") || !strings.Contains(page.String(), "found by name, may not be the target&#39;s") {
		t.Error("report.html does not say which processes were found by name")
	}
	if !strings.Contains(string(js), `"found":"by name"`) {
		t.Errorf("result.json does not mark them: %s", js)
	}
}
