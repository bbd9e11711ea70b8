package server_test

import (
	"testing"

	"imlab/ref/api"
	"imlab/ref/server"
	"imlab/targets/ref/client"
)

// The lab client names the lab routes itself (it talks to the server only
// through its contract); each name must be the server's. A wrong lag/now
// path would not even fail: the client falls back to the snapshot route.
func TestLabClientPathsAreTheServers(t *testing.T) {
	for _, c := range []struct{ client, server string }{
		{client.LagPath, server.LagPath},
		{client.LagNowPath, server.LagNowPath},
		{client.LabInboxPath, api.LabInboxPath},
		{client.LabStoredPath, api.LabStoredPath},
	} {
		if c.client != c.server {
			t.Errorf("the lab client calls %s, the server serves %s", c.client, c.server)
		}
	}
}
