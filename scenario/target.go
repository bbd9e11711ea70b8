package scenario

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// TargetSpec is the scenario's target block: the server under test when it
// is not the reference server the runner starts from its own code. The lab
// reaches it only through its driver (the address) and its process (the
// user's binary and arguments, for exec faults), and stands a proxy in
// front of its database for the database faults. Omitted, or driver ref:
// the reference server of the server block.
type TargetSpec struct {
	// Driver: ref (default) or tinode.
	Driver string `yaml:"driver,omitempty" json:"driver,omitempty"`
	// Address is the loopback host:port the server listens on (its own
	// configuration says so); the load's target is DRIVER+ws://ADDRESS.
	Address string `yaml:"address,omitempty" json:"address,omitempty"`
	// APIKeyEnv names the environment variable that holds the server's
	// API key (never the secret itself; default IMLAB_TINODE_APIKEY).
	APIKeyEnv string `yaml:"api_key_env,omitempty" json:"api_key_env,omitempty"`
	// Exec starts, stops, kills and restarts the server process.
	Exec *TargetExec `yaml:"exec,omitempty" json:"exec,omitempty"`
	// Database puts a proxy in front of the server's database: the
	// server's configuration points at Listen, the proxy forwards to
	// Upstream. Fault target "database".
	Database *TargetDatabase `yaml:"database,omitempty" json:"database,omitempty"`
	// Ready is the server's own readiness check.
	Ready TargetReady `yaml:"ready,omitempty" json:"ready"`
	// LivenessBound is how long after the last fault healed a
	// conversation may still refuse sends before the checker reports
	// refused-after-heal (default DefaultLivenessBound).
	LivenessBound *Duration `yaml:"liveness_bound,omitempty" json:"liveness_bound,omitempty"`
}

// TargetExec is the user's command for the server process. ${VAR} in
// Binary, Args and Dir is taken from the environment; a variable that is
// unset, or a binary that is not there, skips the run with the reason.
type TargetExec struct {
	Binary string   `yaml:"binary" json:"binary"`
	Args   []string `yaml:"args,omitempty" json:"args,omitempty"`
	// Dir is the process's working directory ("": the runner's).
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
	// StopTimeout bounds a graceful stop (SIGTERM) before SIGKILL
	// (default DefaultTargetStopTimeout).
	StopTimeout *Duration `yaml:"stop_timeout,omitempty" json:"stop_timeout,omitempty"`
}

// TargetDatabase is the proxy in front of the server's database.
type TargetDatabase struct {
	Listen   string `yaml:"listen" json:"listen"`
	Upstream string `yaml:"upstream" json:"upstream"`
}

// TargetReady is the readiness check: an HTTP GET of Path on the address
// answered with any status (the server listens and serves), or, with no
// path, a TCP connect to the address; tried until Timeout.
type TargetReady struct {
	Path    string    `yaml:"path,omitempty" json:"path,omitempty"`
	Timeout *Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// Target names and defaults.
const (
	TargetDriverRef    = "ref"
	TargetDriverTinode = "tinode"
	// TargetDatabaseProxy is the fault target of the database proxy.
	TargetDatabaseProxy = "database"
	// TargetServerProcess is the fault target of the exec'd server.
	TargetServerProcess      = "server"
	DefaultAPIKeyEnv         = "IMLAB_TINODE_APIKEY"
	DefaultLivenessBound     = 5 * time.Second
	DefaultReadyTimeout      = 30 * time.Second
	DefaultTargetStopTimeout = 10 * time.Second
	// MaxTargetArgs bounds exec.args.
	MaxTargetArgs = 64
)

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	envRefRE  = regexp.MustCompile(`\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
)

// External tells whether the target is a server the runner does not start
// from its own code.
func (t *TargetSpec) External() bool {
	return t != nil && Or(t.Driver, TargetDriverRef) != TargetDriverRef
}

// APIKeyEnvOr is APIKeyEnv or its default.
func (t *TargetSpec) APIKeyEnvOr() string { return Or(t.APIKeyEnv, DefaultAPIKeyEnv) }

// LivenessBoundOr is LivenessBound or its default.
func (t *TargetSpec) LivenessBoundOr() time.Duration {
	if t.LivenessBound == nil {
		return DefaultLivenessBound
	}
	return t.LivenessBound.D()
}

// ReadyTimeoutOr is Ready.Timeout or its default.
func (t *TargetSpec) ReadyTimeoutOr() time.Duration {
	if t.Ready.Timeout == nil {
		return DefaultReadyTimeout
	}
	return t.Ready.Timeout.D()
}

// StopTimeoutOr is Exec.StopTimeout or its default.
func (e *TargetExec) StopTimeoutOr() time.Duration {
	if e.StopTimeout == nil {
		return DefaultTargetStopTimeout
	}
	return e.StopTimeout.D()
}

// URL is the load's target: tinode+ws://ADDRESS.
func (t *TargetSpec) URL() string { return Or(t.Driver, TargetDriverRef) + "+ws://" + t.Address }

func loopbackHostPort(field, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return Bad(field, "%q: want a loopback host:port with a fixed port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return Bad(field, "%q: the lab drives and faults servers on this machine only (a loopback address)", addr)
	}
	return nil
}

func (t *TargetSpec) validate(f *File) error {
	if t == nil {
		return nil
	}
	switch Or(t.Driver, TargetDriverRef) {
	case TargetDriverRef:
		if t.Address != "" || t.Exec != nil || t.Database != nil || t.APIKeyEnv != "" || t.Ready.Path != "" || t.Ready.Timeout != nil || t.LivenessBound != nil {
			return Bad("target.driver", "ref: the reference server is the server block's; the target block's other keys are for an external server")
		}
		return nil
	case TargetDriverTinode:
	default:
		return Bad("target.driver", "%q: want ref (default) or tinode", t.Driver)
	}
	if err := loopbackHostPort("target.address", t.Address); err != nil {
		return err
	}
	if !envNameRE.MatchString(t.APIKeyEnvOr()) {
		return Bad("target.api_key_env", "%q: want the name of an environment variable (the key itself never goes in the file)", t.APIKeyEnv)
	}
	if t.Exec == nil {
		return Bad("target.exec", "required: the lab starts the server it faults (binary and args)")
	}
	if strings.TrimSpace(t.Exec.Binary) == "" {
		return Bad("target.exec.binary", "required")
	}
	if len(t.Exec.Args) > MaxTargetArgs {
		return Bad("target.exec.args", "%d arguments: at most %d", len(t.Exec.Args), MaxTargetArgs)
	}
	if st := t.Exec.StopTimeout; st != nil && (st.D() <= 0 || st.D() > time.Minute) {
		return Bad("target.exec.stop_timeout", "%s: want (0, 1m]", st.D())
	}
	if d := t.Database; d != nil {
		if err := loopbackHostPort("target.database.listen", d.Listen); err != nil {
			return err
		}
		if err := loopbackHostPort("target.database.upstream", d.Upstream); err != nil {
			return err
		}
		if d.Listen == d.Upstream || d.Listen == t.Address {
			return Bad("target.database.listen", "%q: must differ from the upstream and the server's address", d.Listen)
		}
	}
	if p := t.Ready.Path; p != "" && !strings.HasPrefix(p, "/") {
		return Bad("target.ready.path", "%q: want an absolute path such as /v0/channels", p)
	}
	if rt := t.Ready.Timeout; rt != nil && (rt.D() <= 0 || rt.D() > 5*time.Minute) {
		return Bad("target.ready.timeout", "%s: want (0, 5m]", rt.D())
	}
	if lb := t.LivenessBound; lb != nil && (lb.D() < 0 || lb.D() > MaxScenarioDuration) {
		return Bad("target.liveness_bound", "%s: want 0..%s", lb.D(), MaxScenarioDuration)
	}
	switch {
	case f.Kind == KindCapacity:
		return Bad("target", "kind capacity against an external target is not carried out by the scenario runner: use imlab capacity --target")
	case f.Load.Segments > 1:
		return Bad("load.segments", "an external target runs one generator")
	case f.Matrix != nil:
		return Bad("matrix", "not with an external target")
	case f.Baseline != nil:
		return Bad("baseline", "not with an external target")
	}
	return nil
}

// validateExternalFault checks a fault against an external target:
// database faults on target database (the proxy), stop and kill on target
// server, each then held to its kind's own checks (as on a reference
// backend's proxy, or an exec process).
func (f *File) validateExternalFault(field string, x FaultSpec) error {
	g := *f
	g.Target = nil
	switch x.Kind {
	case KindLatency, KindTimeout, KindResetPeer, KindBandwidth, KindDown:
		if x.Target != TargetDatabaseProxy {
			return Bad(field+".target", "%q: an external target's proxy fault targets database", x.Target)
		}
		if f.Target.Database == nil {
			return Bad(field+".target", "database needs target.database (listen and upstream)")
		}
		x.Target, g.Server = TargetMySQL, ServerSpec{}
		return g.validateFault(field, x, map[string]int{})
	case KindStop, KindKill:
		if x.Target != TargetServerProcess {
			return Bad(field+".target", "%q: an external target's process is %q", x.Target, TargetServerProcess)
		}
		g.Server = ServerSpec{Processes: []ProcessSpec{{Name: TargetServerProcess, Roles: []string{"all"}, Exec: true}}}
		return g.validateFault(field, x, map[string]int{TargetServerProcess: 0})
	default:
		return Bad(field+".kind", "%q: an external target takes latency, timeout, reset_peer, bandwidth, down (target database), stop or kill (target server)", x.Kind)
	}
}

// validateFindings checks expect.findings against the checker's names.
func (e ExpectSpec) validateFindings() error {
	seen := map[string]bool{}
	for i, n := range e.Findings {
		if !slices.Contains(ExpectableFindings, n) {
			return Bad(fmt.Sprintf("expect.findings[%d]", i), "%q: want one of %s", n, strings.Join(ExpectableFindings, ", "))
		}
		if seen[n] {
			return Bad(fmt.Sprintf("expect.findings[%d]", i), "%q named twice", n)
		}
		seen[n] = true
	}
	if len(e.Findings) > 0 && e.VerdictOr() != VerdictInvalid {
		return Bad("expect.findings", "findings the run must make need verdict: invalid")
	}
	return nil
}

// ExpectableFindings are the checker's findings a file may require
// (expect.findings): the ones a target the lab did not write can show.
var ExpectableFindings = []string{"lost", "duplicated", "reordered", "unexpected", "failed-but-stored", "refused-after-heal", "unexplained-gap", "retry-duplicate"}

// ResolveExec expands ${VAR} in the exec block from the environment and
// checks the binary is there. skip is the reason the run cannot be carried
// out on this machine (an unset variable, a missing binary): the run is
// skipped, not failed.
func (t *TargetSpec) ResolveExec(lookup func(string) (string, bool)) (bin string, args []string, dir, skip string) {
	var unset []string
	expand := func(s string) string {
		return envRefRE.ReplaceAllStringFunc(s, func(m string) string {
			name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(m, "$"), "{"), "}")
			v, ok := lookup(name)
			if !ok || v == "" {
				unset = append(unset, name)
			}
			return v
		})
	}
	bin = expand(t.Exec.Binary)
	for _, a := range t.Exec.Args {
		args = append(args, expand(a))
	}
	dir = expand(t.Exec.Dir)
	if len(unset) > 0 {
		slices.Sort(unset)
		return "", nil, "", fmt.Sprintf("target.exec needs %s set (the %s server the user brings)", strings.Join(slices.Compact(unset), ", "), t.Driver)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", nil, "", fmt.Sprintf("target.exec.binary %q is not an executable file here (the %s server the user brings)", bin, t.Driver)
	}
	return bin, args, dir, ""
}
