package driver

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"imlab/targets/tinode"
)

// ErrInvalid is a bad configuration or argument: nothing was done.
var ErrInvalid = errors.New("tinode driver: invalid")

// Named limits and defaults.
const (
	// MaxUsers bounds the population: every device attaches to the p2p
	// topic of its user with every other user (Tinode delivers a {data}
	// only to sessions attached to its topic), so attaching costs a {sub}
	// per other user and group, on every connect.
	MaxUsers = 256
	// MaxGroups bounds the groups of a population.
	MaxGroups = 4096
	// MaxSeq is the highest seq of a topic a msg_id can name (seq takes
	// the low 24 bits of a msg_id).
	MaxSeq = 1<<24 - 1
	// MaxRunHash is the longest run hash: a login is "im" + run hash +
	// "u" + uid, and Tinode accepts logins of at most 32 characters.
	MaxRunHash = 8
	// DefaultWorkers bounds the sessions provisioning and the witness use
	// at once.
	DefaultWorkers = 8
	// DefaultSendersPerUser: sending sessions per user (a tick uses
	// session tick mod n).
	DefaultSendersPerUser = 2
)

// Config of a driver.
type Config struct {
	// Wire is the client configuration every session uses (URL, API key,
	// timeouts). Its DeviceID is set per session.
	Wire tinode.Config
	// RunHash makes this run's logins unique on a server that keeps its
	// accounts: 1 to MaxRunHash lowercase letters or digits.
	RunHash string
	// TagPrefix starts every client tag of this run (the run id): a tag
	// without it is another run's, naming no send of this one.
	TagPrefix string
	// Workers bounds the sessions provisioning and the witness open at
	// once.
	Workers int
	// SendersPerUser is the number of sending sessions per user.
	SendersPerUser int
	// AttachTimeout bounds attaching one session to every topic of its
	// user (login included).
	AttachTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.SendersPerUser == 0 {
		c.SendersPerUser = DefaultSendersPerUser
	}
	if c.AttachTimeout == 0 {
		c.AttachTimeout = time.Minute
	}
	return c
}

// Validate checks c after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.Wire.Validate(); err != nil {
		return fmt.Errorf("%w: wire: %w", ErrInvalid, err)
	}
	if c.RunHash == "" || len(c.RunHash) > MaxRunHash {
		return fmt.Errorf("%w: run hash %q: 1 to %d characters (MaxRunHash)", ErrInvalid, c.RunHash, MaxRunHash)
	}
	for _, r := range c.RunHash {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return fmt.Errorf("%w: run hash %q: only lowercase letters and digits", ErrInvalid, c.RunHash)
		}
	}
	if c.Workers < 1 || c.Workers > 256 {
		return fmt.Errorf("%w: workers %d: 1..256", ErrInvalid, c.Workers)
	}
	if c.SendersPerUser < 1 || c.SendersPerUser > 64 {
		return fmt.Errorf("%w: senders per user %d: 1..64", ErrInvalid, c.SendersPerUser)
	}
	if c.AttachTimeout < 0 {
		return fmt.Errorf("%w: attach timeout %v < 0", ErrInvalid, c.AttachTimeout)
	}
	return nil
}

// Login is the login of lab uid uid in this run.
func (c Config) Login(uid uint64) string { return "im" + c.RunHash + "u" + strconv.FormatUint(uid, 10) }

// password of lab uid uid in this run (Tinode wants at least 6
// characters). The accounts are throwaway: the password only keeps one
// run's sessions apart from another's.
func (c Config) password(uid uint64) string {
	return "pw-" + c.RunHash + "-" + strconv.FormatUint(uid, 10)
}
