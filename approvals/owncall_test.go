package approvals

import (
	"testing"

	"github.com/toolgate/toolgate/pending"
)

// TestOwnCall: an approver is the requester of a call whatever the case,
// and whether either name is spelled with combining marks or composed.
func TestOwnCall(t *testing.T) {
	for _, tt := range []struct {
		approver, subject, principal string
		own                          bool
	}{
		{"alice", "alice", "", true},
		{"Alice", "alice", "", true},
		{"jos\u00e9", "jose\u0301", "", true},
		{"jose\u0301", "jos\u00e9", "", true},
		{"jos\u00e9", "", "key:jose\u0301", true},
		{"jose", "jos\u00e9", "", false},
		{"bob", "alice", "key:alice", false},
	} {
		c := pending.Call{Subject: tt.subject, Principal: tt.principal}
		if got := ownCall(tt.approver, c); got != tt.own {
			t.Errorf("ownCall(%q, subject %q, principal %q) = %v, want %v", tt.approver, tt.subject, tt.principal, got, tt.own)
		}
	}
}
