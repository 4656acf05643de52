package proxy

import "sync"

// bodyBudget is limits.max_body_bytes_total: the memory the request bodies
// being read and decided may hold together, over all callers, and what one
// principal may hold of it. A body holds its bytes while it arrives, then
// what deciding it costs (bodyCost: parsed, a JSON value takes far more
// than its bytes) until its call is decided. Without the share, one agent
// trickling bodies could hold the whole budget and have every other
// agent's calls refused; without the cost, a 1 MiB body of tiny objects
// took some 100 MiB to decide while it held 1 MiB of the budget.
type bodyBudget struct {
	total, share int64
	mu           sync.Mutex
	used         int64
	by           map[string]int64 // principals holding some
}

// newBodyBudget gives each principal a quarter of total, and at least
// room for one body of max bytes.
func newBodyBudget(total, maxBody int64) *bodyBudget {
	return &bodyBudget{total: total, share: min(total, max(total/4, maxBody)), by: map[string]int64{}}
}

// take reserves n bytes for principal, and reports whether they fit.
func (b *bodyBudget) take(principal string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total || b.by[principal]+n > b.share {
		return false
	}
	b.used += n
	b.by[principal] += n
	return true
}

// give returns n bytes take reserved for principal.
func (b *bodyBudget) give(principal string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.by[principal] -= n; b.by[principal] <= 0 {
		delete(b.by, principal)
	}
}

// valueCost is what one JSON value of a body costs once parsed and made a
// policy input, in bytes: measured at 80 to 160 for numbers, strings and
// empty arrays, and some 145 per member of small objects, where the
// members' separators count three tokens.
const valueCost = 160

// bodyCost is what deciding body costs in memory: its bytes, and
// valueCost for each structural token outside strings ("{", "[", ",",
// ":"), which counts its JSON values closely enough. One pass, no
// allocation.
func bodyCost(body []byte) int64 {
	tokens := int64(0)
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[' || c == ',' || c == ':':
			tokens++
		}
	}
	return int64(len(body)) + tokens*valueCost
}
