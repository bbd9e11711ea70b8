package main

import "imlab/ref/server"

// roles is the binary's role registry, in start order: api, relay,
// consumer, history, reconciler (ref/server wires all of them).
func roles() server.Roles {
	return server.DefaultRoles()
}
