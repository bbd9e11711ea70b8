package driver

import (
	"fmt"

	"imlab/targets/tinode"
)

// Conversation types as the ledger numbers them.
const (
	ConvP2P   uint8 = 1
	ConvGroup uint8 = 2
)

// p2pConv is the conversation id of the p2p topic of user indexes a and b.
func (d *Driver) p2pConv(a, b int) uint64 {
	lo, hi := min(a, b), max(a, b)
	return 1 + uint64(len(d.pop.Groups)) + uint64(lo)*uint64(len(d.pop.Users)) + uint64(hi)
}

// Topic is one topic as a user names it, with its conversation id.
type Topic struct {
	Name string
	Conv uint64
}

// topicsOf lists every topic of user index ui: a p2p topic per other user,
// then its groups.
func (d *Driver) topicsOf(ui int) []Topic {
	out := make([]Topic, 0, len(d.pop.Users)-1+len(d.userGroups[ui]))
	for peer := range d.pop.Users {
		if peer != ui {
			out = append(out, Topic{Name: d.tid[peer], Conv: d.p2pConv(ui, peer)})
		}
	}
	for _, gi := range d.userGroups[ui] {
		out = append(out, Topic{Name: d.groups[gi].name, Conv: d.groups[gi].id})
	}
	return out
}

// sendTopic is the topic a send of user index ui names (convType 1: to
// uid target; 2: to group target).
func (d *Driver) sendTopic(ui int, convType uint8, target uint64) (Topic, error) {
	switch convType {
	case ConvP2P:
		peer, ok := d.byUID[target]
		if !ok || peer == ui {
			return Topic{}, fmt.Errorf("%w: send to uid %d: not another user of the population", ErrInvalid, target)
		}
		return Topic{Name: d.tid[peer], Conv: d.p2pConv(ui, peer)}, nil
	case ConvGroup:
		gi, ok := d.byGID[target]
		if !ok {
			return Topic{}, fmt.Errorf("%w: send to group %d: not a group of the population", ErrInvalid, target)
		}
		return Topic{Name: d.groups[gi].name, Conv: d.groups[gi].id}, nil
	}
	return Topic{}, fmt.Errorf("%w: conversation type %d", ErrInvalid, convType)
}

// convOf is the conversation id of topic name as user index ui sees it.
func (d *Driver) convOf(ui int, name string) (uint64, bool) {
	if tinode.IsUserID(name) {
		peer, ok := d.byTID[name]
		if !ok || peer == ui {
			return 0, false
		}
		return d.p2pConv(ui, peer), true
	}
	gi, ok := d.byName[name]
	if !ok {
		return 0, false
	}
	return d.groups[gi].id, true
}

// uidOf is the lab uid of a Tinode user id (0: not of this population).
func (d *Driver) uidOf(tid string) uint64 {
	if i, ok := d.byTID[tid]; ok {
		return d.pop.Users[i]
	}
	return 0
}

// Users is the number of users provisioned.
func (d *Driver) Users() int { return len(d.pop.Users) }

// isGroupConv reports whether conv is a group's.
func (d *Driver) isGroupConv(conv uint64) bool { return conv >= 1 && conv <= uint64(len(d.pop.Groups)) }

// convType is the lab's type of conv: a group's or one to one.
func (d *Driver) convType(conv uint64) uint8 {
	if d.isGroupConv(conv) {
		return ConvGroup
	}
	return ConvP2P
}
