package main

import "imlab/ref/server"

// roles is the binary's role registry, in start order: the server's own
// (api) and the roles other packages contribute (append them here).
func roles() server.Roles {
	return server.DefaultRoles()
}
