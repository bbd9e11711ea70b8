package server

import (
	"context"
	"strconv"
	"time"

	"imlab/ref/retention"
)

// RetentionPath is where every process serves what its retention deleted
// and the settings in force: the lab records it in the ledger to judge
// that no row went before every device of its uid had pulled it or before
// the retention window. Open like RepairsPath (no token; no content:
// uids, seqs and ids), on the api role and on the ops listener.
const RetentionPath = "/v1/lab/retention"

// RetentionAnswer is RetentionPath's answer.
type RetentionAnswer struct {
	// Active: this process runs retention (the reconciler role); the rest
	// of the answer is empty otherwise.
	Active   bool              `json:"active"`
	Settings RetentionSettings `json:"settings"`
	// Passes completed and failed since the process started; LastPassAt
	// (unix ms) when the last one ended, absent before the first.
	Passes       uint64 `json:"passes"`
	FailedPasses uint64 `json:"failed_passes"`
	LastPassAt   *int64 `json:"last_pass_at,omitempty"`
	LastError    string `json:"last_error,omitempty"`
	// Deleted counts every row deleted (Expired past the window, Pulled by
	// early deletion); Rows lists the first retention.MaxLogged of them in
	// the order they were deleted (Truncated: more were).
	Deleted   uint64         `json:"deleted"`
	Expired   uint64         `json:"expired"`
	Pulled    uint64         `json:"pulled"`
	Truncated bool           `json:"truncated"`
	Rows      []RetentionRow `json:"rows"`
}

// RetentionSettings are the retention settings in force (durations in ms).
type RetentionSettings struct {
	// LabShortAges: the lab-only switch that allowed ages and interval in
	// seconds (retention.Config.LabShortAges).
	LabShortAges   bool  `json:"lab_short_ages"`
	MaxAgeMS       int64 `json:"max_age_ms"`
	PulledMinAgeMS int64 `json:"pulled_min_age_ms"`
	IntervalMS     int64 `json:"interval_ms"`
	ScanPage       int   `json:"scan_page"`
	DeleteBatch    int   `json:"delete_batch"`
}

// RetentionRow is one deleted offline_msg row; ids also as strings of
// their digits (msg_id and conv_id pass 2^53). Times are unix ms;
// deleted_at is the pass's clock. Reason: expired or pulled.
type RetentionRow struct {
	UID       uint64 `json:"uid"`
	Seq       uint64 `json:"seq"`
	MsgID     uint64 `json:"msg_id"`
	MsgIDStr  string `json:"msg_id_str"`
	ConvID    uint64 `json:"conv_id"`
	ConvIDStr string `json:"conv_id_str"`
	CreatedAt int64  `json:"created_at"`
	DeletedAt int64  `json:"deleted_at"`
	Reason    string `json:"reason"`
}

// Retention is what this process's retention did since it started.
func (p *Process) Retention() RetentionAnswer {
	c := p.Cfg.Retention
	a := RetentionAnswer{
		Active: p.roleSet[RoleReconciler],
		Settings: RetentionSettings{LabShortAges: c.LabShortAges, MaxAgeMS: c.MaxAge.Milliseconds(), PulledMinAgeMS: c.PulledMinAge.Milliseconds(),
			IntervalMS: c.Interval.Milliseconds(), ScanPage: c.ScanPage, DeleteBatch: c.DeleteBatch},
		Rows: []RetentionRow{},
	}
	s := p.retention.Snapshot()
	a.Passes, a.FailedPasses, a.LastError = s.Passes, s.FailedPasses, s.LastError
	if !s.LastPass.IsZero() {
		ms := s.LastPass.UnixMilli()
		a.LastPassAt = &ms
	}
	a.Deleted, a.Expired, a.Pulled, a.Truncated = s.Deleted, s.Expired, s.Pulled, s.Truncated
	for _, d := range s.Rows {
		a.Rows = append(a.Rows, RetentionRow{UID: d.UID, Seq: d.Seq, MsgID: d.MsgID, MsgIDStr: strconv.FormatUint(d.MsgID, 10),
			ConvID: d.ConvID, ConvIDStr: strconv.FormatUint(d.ConvID, 10), CreatedAt: d.CreatedAt.UnixMilli(), DeletedAt: d.DeletedAt.UnixMilli(), Reason: d.Reason})
	}
	return a
}

func (p *Process) retentionAnswer(context.Context) (any, error) { return p.Retention(), nil }

// retentionLog is the process's bounded record of what its retention
// deleted (RetentionPath).
type retentionLog = retention.Log

// LabRetention sets cfg's retention to lab short ages (LAB ONLY: see
// retention.Config.LabShortAges): the window maxAge, the early-deletion
// grace pulledMinAge and the pass interval, each allowed down to seconds.
// The result is checked as Start would check it; the error names the
// setting.
func LabRetention(cfg *Config, maxAge, pulledMinAge, interval time.Duration) error {
	c := cfg.Retention
	c.LabShortAges, c.MaxAge, c.PulledMinAge, c.Interval = true, maxAge, pulledMinAge, interval
	if err := c.Validate(); err != nil {
		return err
	}
	cfg.Retention = c
	return nil
}
