package ref

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ReadyPoll is how often WaitHealthy asks the target again.
const ReadyPoll = 250 * time.Millisecond

// WaitHealthy waits, up to bound, for target's GET /healthz to answer 200:
// a server started just before (imlab up &) is still starting its
// backends. It says on w that it waits, and for how long it waited; a
// target not ready by then is an error naming the last answer.
func WaitHealthy(ctx context.Context, target string, bound time.Duration, w io.Writer) error {
	url := strings.TrimRight(target, "/") + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	said := false
	for {
		last := probeHealthz(ctx, hc, url)
		if last == "" {
			if said {
				fmt.Fprintf(w, "%s ready after %s\n", url, time.Since(start).Round(100*time.Millisecond))
			}
			return nil
		}
		if !said {
			fmt.Fprintf(w, "waiting up to %s for %s to answer 200 (--wait-ready): %s\n", bound, url, last)
			said = true
		}
		select {
		case <-ctx.Done():
			if cerr := context.Cause(ctx); errors.Is(cerr, context.Canceled) {
				return cerr
			}
			return fmt.Errorf("the target is not ready: %s did not answer 200 within %s (last: %s); is the server running? (imlab up prints \"imlab ready\" when it is)", url, bound, last)
		case <-time.After(ReadyPoll):
		}
	}
}

// probeHealthz asks url once: "" when it answered 200, else what it did.
func probeHealthz(ctx context.Context, hc *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "HTTP " + resp.Status
	}
	return ""
}
