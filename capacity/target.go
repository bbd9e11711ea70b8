package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// ProcsPath is the contract's lab route that names the server process
// behind the target: {"pid": N, "roles": [...]} (mounted with the lab
// routes only: imlab up and the scenario runner; imlab ref with
// --lab-routes).
const ProcsPath = "/v1/lab/procs"

// ErrNoProcsRoute: the target does not serve ProcsPath (its lab routes
// are off); its processes are then watched only when given by pid or
// command name.
var ErrNoProcsRoute = errors.New("capacity: the target serves no " + ProcsPath + " (lab routes off, e.g. imlab ref without --lab-routes): give its pid with --pid")

// TargetProcs asks the target which process serves it. The pid is this
// machine's only when the target is on a loopback address: a remote
// target's pid is not read (an error says so). The process is named
// "server" with its roles ("server[api,consumer]") so that the cost
// figures say what ran where.
func TargetProcs(ctx context.Context, target string) ([]Proc, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("%w: target %q: %v", ErrInvalid, target, err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("capacity: target %s is not on a loopback address: its processes' CPU cannot be read from this machine's /proc", target)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(target, "/")+ProcsPath, nil)
	if err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("capacity: %s%s: %w", target, ProcsPath, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, ErrNoProcsRoute
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("capacity: %s%s: status %d", target, ProcsPath, resp.StatusCode)
	}
	var a struct {
		PID   int      `json:"pid"`
		Roles []string `json:"roles"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&a); err != nil {
		return nil, fmt.Errorf("capacity: %s%s: %w", target, ProcsPath, err)
	}
	if a.PID <= 0 {
		return nil, fmt.Errorf("capacity: %s%s: no pid in the answer", target, ProcsPath)
	}
	if a.PID == os.Getpid() {
		return nil, fmt.Errorf("capacity: the target runs inside this process (pid %d): its CPU is the generator's", a.PID)
	}
	if _, err := cpuTime(a.PID); err != nil {
		return nil, fmt.Errorf("capacity: the target's pid %d cannot be read here (%v): is it on another machine or in a container?", a.PID, err)
	}
	name := "server"
	if len(a.Roles) > 0 {
		name += "[" + strings.Join(a.Roles, ",") + "]"
	}
	return []Proc{{Name: name, PID: a.PID}}, nil
}
