package faults

import "imlab/chaos"

// Down takes a backend's proxy down (connections refused) until healed.
type Down struct{}

// Name is "down".
func (Down) Name() string { return "down" }

// Params are the parameters down takes.
func (Down) Params() []string { return nil }

// Unit is what the count of a down counts.
func (Down) Unit() string { return "" }

// CheckTarget: a backend's proxy.
func (Down) CheckTarget(field string, x Spec, c Context) error { return proxyTarget(field, x, c) }

// CheckValues: nothing more.
func (Down) CheckValues(field string, x Spec, c Context) error { return noValues(field, x, c) }

// Build takes the proxy down.
func (Down) Build(x Spec, env Env) (chaos.Fault, error) {
	return chaos.ProxyDown(env.Proxies, x.Target), nil
}
