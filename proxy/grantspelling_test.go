package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestGrantForOneSpellingOfAURL: a grant for
// https://api.example.com/users/alice/profile covers that URL, and no
// other spelling of it that a server may read as another resource: an
// escaped dot segment, an empty segment, an escaped slash, also after one
// slash (WHATWG fetch reads "https:/" as "https://"), which stood in.
func TestGrantForOneSpellingOfAURL(t *testing.T) {
	store := pending.NewMemory(pending.Options{})
	env := newGrantEnv(t, store, `rules:
  - {id: r1, effect: ask, tool: Fetch, target: "*"}
`)
	if _, err := store.Grant(context.Background(), pending.Grant{
		Subject: "key:agent-42", Upstream: "files", Tool: "Fetch", Target: "https://api.example.com/users/alice/profile", Approver: "alice", CallID: "C1",
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"https://api.example.com/users/alice/profile", // the grant's: allowed
		"https://api.example.com/users/mallory/%2e%2e/alice/profile",
		"https:/api.example.com/users/mallory/%2e%2e/alice/profile",
		"https:/api.example.com/users//alice/profile",
		"https:/api.example.com/users%2Falice%2Fprofile",
		// Spaces around a URL, which asURL and WHATWG parsers drop; a
		// trailing dot written as an ideographic full stop; an escaped @.
		" https://evil:pw@api.example.com/users/alice/profile",
		" https://api.example.com./users/alice/profile",
		" https://api.example.com/users/mallory/%2e%2e/alice/profile",
		" https://api.example.com/users//alice/profile",
		"https://api.example.com\u3002/users/alice/profile",
		"https://evil%40api.example.com/users/alice/profile",
	} {
		res := post(t, env.url+"/tools/Fetch", `{"url":"`+u+`"}`, "Authorization", "Bearer agent-key")
		want := 202
		if u == "https://api.example.com/users/alice/profile" {
			want = 200
		}
		if res.StatusCode != want {
			t.Errorf("%s: %d (%s), want %d", u, res.StatusCode, res.Header.Get("X-Toolgate-Decision"), want)
		}
	}
}
