package approvals_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// BenchmarkDecideByAPI is one approval through POST /api/approvals/{id},
// as a bot approver sends it, on the memory store: the handler's part of
// an approved ask (the audit record and OnDecision go to functions that
// do nothing). The calls are parked and the requests made with the clock
// stopped.
func BenchmarkDecideByAPI(b *testing.B) {
	store := pending.NewMemory(pending.Options{})
	signer, err := approvals.NewSigner([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	h, err := approvals.New(approvals.Config{
		Store: store, Signer: signer, PublicURL: publicURL,
		Approvers:  []approvals.Approver{{Name: "bench-approver", Key: aliceKey}},
		Audit:      func(context.Context, approvals.AuditRecord) {},
		OnDecision: func(pending.Call) {},
	})
	if err != nil {
		b.Fatal(err)
	}
	info := callinfo.Info{
		Kind: "rest", Tool: "write_note", Upstream: "notes", Subject: "agent-42", Target: "notes/today.txt",
		Arguments: []byte(`{"path":"notes/today.txt","content":"hello"}`), Reasons: []string{"writes need approval"},
		RuleIDs: []string{"r3"}, Method: "POST", Path: "/tools/write_note",
	}
	// Parked in batches, the clock stopped, so the store holds about as
	// many waiting calls as a busy toolgate rather than b.N.
	const batch = 1000
	reqs := make([]*http.Request, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(reqs) == 0 {
			b.StopTimer()
			for range min(batch, b.N-i) {
				c, _, err := store.Park(b.Context(), pending.Call{
					ID: rand.Text(), Subject: "agent-42", Principal: "key:agent-42", Upstream: "notes", Tool: "write_note",
					Request: []byte("POST /tools/write_note\n{}"), RequestDigest: rand.Text(), Info: info.Encode(), Brief: callinfo.BriefOf(info),
				}, time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				req := httptest.NewRequest(http.MethodPost, "/api/approvals/"+c.ID, strings.NewReader(`{"decision":"approve"}`))
				req.Header.Set("Authorization", "Bearer "+aliceKey)
				req.Header.Set("Content-Type", "application/json")
				reqs = append(reqs, req)
			}
			b.StartTimer()
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, reqs[0])
		if rec.Code != http.StatusOK {
			b.Fatalf("decision: %d %s", rec.Code, rec.Body)
		}
		reqs = reqs[1:]
	}
}
