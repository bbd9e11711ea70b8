package compose

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// startError is why a private server did not start: Err is the whole
// story (what the tool printed last), Cause the one line of it that says
// why, for the operator and the run's record.
type startError struct {
	Cause string
	Err   error
}

func (e *startError) Error() string { return e.Err.Error() }
func (e *startError) Unwrap() error { return e.Err }

// failedStart wraps err (its text: a tool's or a log's output) as a
// startError whose cause is the line of out that says why, or why when
// out says nothing that reads as an error.
func failedStart(err error, out, why string) error {
	cause := causeLine(out)
	if cause == "" {
		cause = why
	}
	return &startError{Cause: cause, Err: err}
}

// maxCauseLen bounds a cause as shown beside a backend (Summary).
const maxCauseLen = 200

// logPrefix is the timestamp, thread and level a MariaDB/MySQL error log
// line starts with ("2026-12-04  2:01:13 0 [ERROR] ").
var logPrefix = regexp.MustCompile(`^\d{4}-\d\d-\d\d[ T]\s*\d+:\d\d:\d\d(\.\d+)?Z?\s+\d+\s+\[ERROR\]\s*(\[[^]]*\]\s*)?`)

// errorWords are what a line that says why a tool failed contains when it
// has no [ERROR] tag (mariadb-install-db's own messages, chown's, Redis's
// "# " log lines).
var errorWords = regexp.MustCompile(`(?i)\b(error|fatal|failed|cannot|can't|could not|not permitted|permission denied|no space|no such file|address already in use|killed)\b`)

// causeLine picks, from what a failed tool or server printed, the line
// that says why: the first line tagged [ERROR] (its timestamp cut), else
// the first line that reads as an error, else ""; the first, because what
// follows it is mostly its consequences ("Aborting", "Installation of
// system tables failed!").
func causeLine(out string) string {
	lines := strings.Split(out, "\n")
	pick := ""
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.Contains(l, "[ERROR]") {
			pick = strings.TrimSpace(logPrefix.ReplaceAllString(l, ""))
			break
		}
	}
	if pick == "" {
		for _, l := range lines {
			if l = strings.TrimSpace(l); errorWords.MatchString(l) {
				pick = l
				break
			}
		}
	}
	return clip(pick)
}

func clip(s string) string {
	if len(s) <= maxCauseLen {
		return s
	}
	cut := maxCauseLen
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// fallbackCause is why a local server's start failed, in one line: the
// cause it recorded, else the first line of its error without compose's
// own prefix.
func fallbackCause(err error) string {
	var se *startError
	if errors.As(err, &se) && se.Cause != "" {
		return se.Cause
	}
	s := strings.TrimPrefix(firstLine(err), ErrUnavailable.Error()+": ")
	return clip(s)
}

// fallBack records that part runs embedded because its local server did
// not start (or was not found), with the cause, in Backends.Fallbacks and
// as a warning.
func (r *run) fallBack(part, what, embedded, cause string) {
	if r.b.Fallbacks == nil {
		r.b.Fallbacks = map[string]string{}
	}
	r.b.Fallbacks[part] = cause
	w := fmt.Sprintf("%s fell back to embedded %s: %s", what, embedded, cause)
	r.b.fallbackWarnings = append(r.b.fallbackWarnings, w)
	r.warn(w)
}

// IsFallback tells a warning of Backends.Warnings that says a part fell
// back to embedded (Fallbacks holds its cause) from the others, for a
// caller that shows fallbacks apart.
func (b *Backends) IsFallback(warning string) bool {
	return slices.Contains(b.fallbackWarnings, warning)
}
