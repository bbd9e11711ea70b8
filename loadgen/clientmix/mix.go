// Package clientmix owns the client mix: what a load run's devices do
// besides sending, pulling their inbox and receiving pushes (enter a
// conversation, read a history page, revoke, delete for oneself, clear,
// mark read), as probabilities: its validation, the target actions it
// needs, its presets and flags, and its yaml keys.
//
// It must not do anything: the devices (loadgen/device) carry the mix out,
// and it must not import other loadgen packages.
package clientmix

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"imlab/ledger"
	"imlab/targets"
)

// Mix is what the population's devices do besides sending, pulling their
// inbox and receiving pushes: the actions of an IM client. Every field is
// a probability (0..1) of one decision, or a size; the zero Mix is off and
// the generator behaves exactly as without it. One definition serves the
// Go API, the scenario file's load block (the yaml keys) and the flags of
// imlab load (RegisterFlags).
//
// A device *enters* a conversation by a conversation pull of the gap
// since its cursor (action conv-pull), then a history page of the newest
// HistoryPage conv_seqs (action history), as a client opening a chat
// does: OpenIM's SDK, on opening a conversation, syncs that conversation's
// missing seqs from the server and loads the latest page of history (20
// by default) and marks the conversation read; Tinode's web and mobile
// clients attach to the topic ({sub} with {get data} of the latest page,
// 24 messages) and send {note read} for the newest seq. Default follows
// them: a device coming online enters about half of the conversations its
// catch-up brought news of (the rest stay unread in the list), a push
// lands in a conversation the device has open one time in ten, a history
// page is 20 messages, and a 1:1 recipient marks what it saw read most of
// the time. Revokes, deletes for oneself and clears are rare user actions
// (a few per thousand messages; clears rarer still).
type Mix struct {
	// EnterOnOnline: a device coming online (a WebSocket connected, an
	// offline device's visit) enters each conversation its catch-up
	// brought new messages of with this probability.
	EnterOnOnline float64 `yaml:"enter_on_online" json:"enter_on_online"`
	// OpenOnPush: a push belongs to a conversation the device has open
	// with this probability; the device then enters it.
	OpenOnPush float64 `yaml:"open_on_push" json:"open_on_push"`
	// HistoryPage: conv_seqs of the history page read on entering (0: no
	// history page, the conversation pull only).
	HistoryPage int `yaml:"history_page" json:"history_page"`
	// Revoke: the sender revokes a message of its own right after its ACK.
	Revoke float64 `yaml:"revoke" json:"revoke"`
	// Delete: a device entering a conversation deletes (for its user) a
	// message the page showed.
	Delete float64 `yaml:"delete" json:"delete"`
	// Clear: a device entering a conversation clears it for its user.
	Clear float64 `yaml:"clear" json:"clear"`
	// Read: a device entering a 1:1 conversation marks what the page
	// showed read.
	Read float64 `yaml:"read" json:"read"`
}

// ErrInvalid marks a bad mix, or one the target cannot carry out.
var ErrInvalid = errors.New("clientmix: invalid")

// MaxHistoryPage bounds Mix.HistoryPage (the reference's default history
// range).
const MaxHistoryPage = 100

// Default is the realistic mix the type's doc explains.
func Default() Mix {
	return Mix{EnterOnOnline: 0.5, OpenOnPush: 0.1, HistoryPage: 20, Revoke: 0.005, Delete: 0.01, Clear: 0.002, Read: 0.8}
}

// On says whether any action is asked for.
func (m Mix) On() bool { return m != Mix{} }

// probabilities lists the mix's probabilities by yaml key.
func (m Mix) probabilities() []struct {
	key string
	p   float64
} {
	return []struct {
		key string
		p   float64
	}{{"enter_on_online", m.EnterOnOnline}, {"open_on_push", m.OpenOnPush}, {"revoke", m.Revoke},
		{"delete", m.Delete}, {"clear", m.Clear}, {"read", m.Read}}
}

// Validate checks every field, naming the key of a bad one.
func (m Mix) Validate() error {
	for _, x := range m.probabilities() {
		if !(x.p >= 0 && x.p <= 1) { // NaN fails too
			return fmt.Errorf("%w: mix.%s = %g: a probability must be in 0..1", ErrInvalid, x.key, x.p)
		}
	}
	if m.HistoryPage < 0 || m.HistoryPage > MaxHistoryPage {
		return fmt.Errorf("%w: mix.history_page = %d must be in 0..%d", ErrInvalid, m.HistoryPage, MaxHistoryPage)
	}
	return nil
}

// needs lists, by yaml key, the target action each asked-for part of the
// mix relies on.
func (m Mix) needs() []struct {
	key    string
	action ledger.Action
} {
	type need = struct {
		key    string
		action ledger.Action
	}
	var out []need
	entering := m.EnterOnOnline > 0 || m.OpenOnPush > 0
	if entering {
		key := "enter_on_online"
		if m.EnterOnOnline == 0 {
			key = "open_on_push"
		}
		out = append(out, need{key, ledger.ActConvPull})
		if m.HistoryPage > 0 {
			out = append(out, need{"history_page", ledger.ActHistory})
		}
	}
	if m.Revoke > 0 {
		out = append(out, need{"revoke", ledger.ActRevoke})
	}
	if entering && m.Delete > 0 {
		out = append(out, need{"delete", ledger.ActDelete})
	}
	if entering && m.Clear > 0 {
		out = append(out, need{"clear", ledger.ActClear})
	}
	if entering && m.Read > 0 {
		out = append(out, need{"read", ledger.ActRead})
	}
	return out
}

// Offered checks that the target offers every action the mix asks for,
// naming the key of the first it does not.
func (m Mix) Offered(c targets.Capabilities) error {
	for _, n := range m.needs() {
		if !c.Offers(n.action.String()) {
			return fmt.Errorf("%w: mix.%s asks for %s, which the target (driver %s) does not offer", ErrInvalid, n.key, n.action, c.Driver)
		}
	}
	return nil
}

// Mix presets (the --mix flag).
const (
	PresetOff     = "off"
	PresetDefault = "default"
)

// mixPreset is the --mix flag: it sets every key at once.
type mixPreset struct {
	m    *Mix
	name string
}

func (p *mixPreset) String() string { return p.name }
func (p *mixPreset) Type() string   { return "preset" }
func (p *mixPreset) Set(v string) error {
	switch v {
	case PresetOff:
		*p.m = Mix{}
	case PresetDefault:
		*p.m = Default()
	default:
		return fmt.Errorf("%w: mix preset %q: want %s or %s", ErrInvalid, v, PresetOff, PresetDefault)
	}
	p.name = v
	return nil
}

// RegisterFlags registers --mix (a preset: off or default, setting every
// key; the --mix-* flags after it override one key each) and one flag per
// key (--mix-enter-on-online, ...) on f, defaulting to m's values,
// writing into m.
func (m *Mix) RegisterFlags(f *pflag.FlagSet) {
	preset := PresetOff
	if m.On() {
		preset = "custom"
		if *m == Default() {
			preset = PresetDefault
		}
	}
	f.Var(&mixPreset{m: m, name: preset}, "mix", fmt.Sprintf("client mix preset: %s (devices only send, pull and receive pushes) or %s (%+v: what IM clients do on opening a conversation); --mix-* flags after it override one key each", PresetOff, PresetDefault, Default()))
	f.Float64Var(&m.EnterOnOnline, "mix-enter-on-online", m.EnterOnOnline, "client mix: probability that a device coming online enters a conversation its catch-up brought news of (conversation pull, history page)")
	f.Float64Var(&m.OpenOnPush, "mix-open-on-push", m.OpenOnPush, "client mix: probability that a push is for a conversation the device has open (it enters it)")
	f.IntVar(&m.HistoryPage, "mix-history-page", m.HistoryPage, fmt.Sprintf("client mix: conv_seqs of the history page read on entering a conversation (0..%d; 0: none)", MaxHistoryPage))
	f.Float64Var(&m.Revoke, "mix-revoke", m.Revoke, "client mix: probability that a sender revokes its message right after the ACK")
	f.Float64Var(&m.Delete, "mix-delete", m.Delete, "client mix: probability that a device entering a conversation deletes a message it saw, for its user")
	f.Float64Var(&m.Clear, "mix-clear", m.Clear, "client mix: probability that a device entering a conversation clears it for its user")
	f.Float64Var(&m.Read, "mix-read", m.Read, "client mix: probability that a device entering a 1:1 conversation marks what it saw read")
}
