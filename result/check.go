package result

import (
	"time"
)

// Check is one evaluated expectation.
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// secs formats seconds as a rounded duration.
func Secs(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(10 * time.Millisecond).String()
}
