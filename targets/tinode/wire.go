package tinode

import (
	"encoding/json"
	"time"
)

// Client → server frames. Each frame is one JSON object with exactly one
// member named for the message ({hi}, {acc}, ...), sent in one text frame.
type clientFrame struct {
	Hi    *hiMsg    `json:"hi,omitempty"`
	Acc   *accMsg   `json:"acc,omitempty"`
	Login *loginMsg `json:"login,omitempty"`
	Sub   *subMsg   `json:"sub,omitempty"`
	Leave *leaveMsg `json:"leave,omitempty"`
	Pub   *pubMsg   `json:"pub,omitempty"`
	Get   *getMsg   `json:"get,omitempty"`
	Set   *setMsg   `json:"set,omitempty"`
	Del   *delMsg   `json:"del,omitempty"`
	Note  *noteMsg  `json:"note,omitempty"`
}

type hiMsg struct {
	ID  string `json:"id,omitempty"`
	Ver string `json:"ver"`
	UA  string `json:"ua,omitempty"`
	Dev string `json:"dev,omitempty"`
}

type accMsg struct {
	ID     string   `json:"id,omitempty"`
	User   string   `json:"user"`
	Scheme string   `json:"scheme"`
	Secret string   `json:"secret"`
	Login  bool     `json:"login,omitempty"`
	Tags   []string `json:"tags,omitempty"`
	Desc   *accDesc `json:"desc,omitempty"`
}

type accDesc struct {
	Public any `json:"public,omitempty"`
}

type loginMsg struct {
	ID     string `json:"id,omitempty"`
	Scheme string `json:"scheme"`
	Secret string `json:"secret"`
}

type subMsg struct {
	ID    string  `json:"id,omitempty"`
	Topic string  `json:"topic"`
	Set   *subSet `json:"set,omitempty"`
}

type subSet struct {
	Desc *setDesc `json:"desc,omitempty"`
	Tags []string `json:"tags,omitempty"`
}

type setDesc struct {
	Public any `json:"public,omitempty"`
}

type leaveMsg struct {
	ID    string `json:"id,omitempty"`
	Topic string `json:"topic"`
	Unsub bool   `json:"unsub,omitempty"`
}

type pubMsg struct {
	ID      string         `json:"id,omitempty"`
	Topic   string         `json:"topic"`
	NoEcho  bool           `json:"noecho,omitempty"`
	Head    map[string]any `json:"head,omitempty"`
	Content any            `json:"content"`
}

type getMsg struct {
	ID    string    `json:"id,omitempty"`
	Topic string    `json:"topic"`
	What  string    `json:"what"`
	Data  *getRange `json:"data,omitempty"`
	Del   *getRange `json:"del,omitempty"`
}

// getRange is the {get} query of "data" (by message seq) and "del" (by
// delete transaction id): since inclusive, before exclusive.
type getRange struct {
	Since  int64 `json:"since,omitempty"`
	Before int64 `json:"before,omitempty"`
	Limit  int   `json:"limit,omitempty"`
}

type setMsg struct {
	ID    string  `json:"id,omitempty"`
	Topic string  `json:"topic"`
	Sub   *setSub `json:"sub,omitempty"`
}

type setSub struct {
	User string `json:"user,omitempty"`
	Mode string `json:"mode,omitempty"`
}

type delMsg struct {
	ID     string     `json:"id,omitempty"`
	Topic  string     `json:"topic"`
	What   string     `json:"what"`
	Hard   bool       `json:"hard,omitempty"`
	DelSeq []SeqRange `json:"delseq,omitempty"`
}

type noteMsg struct {
	Topic string `json:"topic"`
	What  string `json:"what"`
	Seq   int64  `json:"seq,omitempty"`
}

// Server → client frames.
type serverFrame struct {
	Ctrl *Ctrl     `json:"ctrl,omitempty"`
	Data *wireData `json:"data,omitempty"`
	Meta *wireMeta `json:"meta,omitempty"`
	Pres *Pres     `json:"pres,omitempty"`
	Info *Info     `json:"info,omitempty"`
}

// Ctrl is a {ctrl} answer: a request's result (code follows the HTTP model),
// or, without a pending request, a server notice such as 205 "evicted".
type Ctrl struct {
	ID     string          `json:"id,omitempty"`
	Topic  string          `json:"topic,omitempty"`
	Code   int             `json:"code"`
	Text   string          `json:"text"`
	Params json.RawMessage `json:"params,omitempty"`
	TS     time.Time       `json:"ts"`
}

type wireData struct {
	Topic   string                     `json:"topic"`
	From    string                     `json:"from,omitempty"`
	Head    map[string]json.RawMessage `json:"head,omitempty"`
	TS      time.Time                  `json:"ts"`
	Seq     int64                      `json:"seq"`
	Content json.RawMessage            `json:"content"`
}

type wireMeta struct {
	ID    string      `json:"id,omitempty"`
	Topic string      `json:"topic,omitempty"`
	Desc  *wireDesc   `json:"desc,omitempty"`
	Sub   []wireSub   `json:"sub,omitempty"`
	Del   *wireDelLog `json:"del,omitempty"`
}

type wireAcs struct {
	Want  string `json:"want,omitempty"`
	Given string `json:"given,omitempty"`
	Mode  string `json:"mode,omitempty"`
}

type wireDesc struct {
	Acs   *wireAcs `json:"acs,omitempty"`
	Seq   int64    `json:"seq,omitempty"`
	Read  int64    `json:"read,omitempty"`
	Recv  int64    `json:"recv,omitempty"`
	Clear int64    `json:"clear,omitempty"`
}

type wireSub struct {
	User string   `json:"user,omitempty"`
	Acs  *wireAcs `json:"acs,omitempty"`
	Read int64    `json:"read,omitempty"`
	Recv int64    `json:"recv,omitempty"`
}

type wireDelLog struct {
	Clear  int64      `json:"clear"`
	DelSeq []SeqRange `json:"delseq"`
}

// Pres is a {pres} notification (transient, never stored by the server).
type Pres struct {
	Topic  string     `json:"topic"`
	Src    string     `json:"src,omitempty"`
	What   string     `json:"what"`
	Seq    int64      `json:"seq,omitempty"`
	Clear  int64      `json:"clear,omitempty"`
	DelSeq []SeqRange `json:"delseq,omitempty"`
}

// Info is an {info} notification: another session's {note} forwarded.
type Info struct {
	Topic string `json:"topic"`
	Src   string `json:"src,omitempty"`
	From  string `json:"from,omitempty"`
	What  string `json:"what"`
	Seq   int64  `json:"seq,omitempty"`
}

// SeqRange is a range of message seqs as the protocol writes it: Low
// inclusive, Hi exclusive; Hi == 0 means the single seq Low.
type SeqRange struct {
	Low int64 `json:"low"`
	Hi  int64 `json:"hi,omitempty"`
}

// End is the exclusive end of r (Low+1 for a single seq).
func (r SeqRange) End() int64 {
	if r.Hi == 0 {
		return r.Low + 1
	}
	return r.Hi
}

// Contains reports whether seq lies in r.
func (r SeqRange) Contains(seq int64) bool { return seq >= r.Low && seq < r.End() }

func (r SeqRange) valid() bool { return r.Low >= 1 && (r.Hi == 0 || r.Hi > r.Low) }
