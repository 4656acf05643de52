package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/toolgate/toolgate/notify"
)

func ExampleVerify() {
	const secret = "whsec_c2VjcmV0LWtleS1ieXRlcw=="

	// A receiver verifies the raw body before it parses anything.
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if err := notify.Verify(secret, r.Header, body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		_ = json.Unmarshal(body, &ev)
		got <- ev.Type + " " + ev.ID
	}))
	defer receiver.Close()

	n, err := notify.New(notify.Options{
		Targets: []notify.Target{{URL: receiver.URL, Secret: secret}},
	})
	if err != nil {
		panic(err)
	}
	n.Notify(notify.Event{
		Type:        notify.TypeRequested,
		CallID:      "01JDX3N7Q8",
		Tool:        "write_note",
		ApprovalURL: "https://approvals.example/approvals/01JDX3N7Q8?token=…",
		ExpiresAt:   time.Now().Add(15 * time.Minute),
	})
	fmt.Println(<-got)
	_ = n.Close(context.Background())
	// Output:
	// dev.toolgate.approval.requested 01JDX3N7Q8
}
