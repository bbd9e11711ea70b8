package proc

import (
	"context"
	"fmt"
	"net/http"

	"imlab/ref/server"
)

// fetchRepairs reads one process's RepairsPath.
func fetchRepairs(ctx context.Context, addr string) (server.Repairs, error) {
	var out server.Repairs
	hc := &http.Client{Timeout: ScrapeTimeout}
	defer hc.CloseIdleConnections()
	if err := GetJSON(ctx, hc, "http://"+addr+server.RepairsPath, &out); err != nil {
		return out, fmt.Errorf("repairs: %w", err)
	}
	return out, nil
}
