package conv

import (
	"fmt"
	"strings"
)

// ValidateUnexplainedGap: in a conversation the history witness read
// whole, a conv_seq up to the highest known (the server's head, the
// highest stored, the highest ACKed) that holds no message, that no
// message of the model sits at, that no delete range or purge explains,
// beyond as many as the sends of unknown outcome to that conversation
// whose message was never found (each may have taken a conv_seq and not
// stored it). A send refused with a definite error explains none.
func ValidateUnexplainedGap(m *Model, f Marker) {
	budget := m.unfound()
	n := 0
	for _, c := range m.judgedConvs() {
		var holes []uint64
		for seq := uint64(1); seq <= c.top(); seq++ {
			if _, stored := c.slots[seq]; !stored && !c.hasMsg(seq) && !c.deletedRange(seq, 0) {
				holes = append(holes, seq)
			}
		}
		if over := len(holes) - budget[c.id]; over > 0 {
			n += over
			f.Conv(c.id)
			f.Item(fmt.Sprint(c.id), "conv %d: %d conv_seqs up to %d hold no message (%s), %d sends of unknown outcome to it explain at most %d",
				c.id, len(holes), c.top(), FirstFew(holes), budget[c.id], budget[c.id])
		}
	}
	f.Count(n)
}

// top is the highest conv_seq the conversation is known to have reached.
func (c *conversation) top() uint64 {
	top := c.head
	for seq := range c.slots {
		top = max(top, seq)
	}
	for seq := range c.msgs {
		top = max(top, seq)
	}
	return top
}

func (c *conversation) hasMsg(seq uint64) bool { _, ok := c.msgs[seq]; return ok }

// MaxListed bounds how many numbers an example lists.
const MaxListed = 10

// FirstFew lists the first MaxListed numbers of ns, and how many more.
func FirstFew(ns []uint64) string {
	var out []string
	for i, t := range ns {
		if i == MaxListed {
			out = append(out, fmt.Sprintf("... (+%d)", len(ns)-MaxListed))
			break
		}
		out = append(out, fmt.Sprint(t))
	}
	return strings.Join(out, " ")
}

// Marker is how a rule marks its finding: package checker gives each rule
// the marker of its own finding only.
type Marker interface {
	// Mark puts msg_id msg into the finding (and uid, when not 0), and
	// keeps the example the first time msg is marked.
	Mark(msg, uid uint64, format string, args ...any)
	// Add puts msg into the finding without an example.
	Add(msg uint64)
	// Conv names a conversation concerned.
	Conv(c uint64)
	// Item counts something that is no message once per key, and keeps
	// the example the first time.
	Item(key, format string, args ...any)
	// Count sets the finding's count instead of its number of msg_ids.
	Count(n int)
}
