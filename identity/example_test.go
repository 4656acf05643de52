package identity_test

import (
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/toolgate/toolgate/identity"
)

func ExampleAuthenticator_Authenticate() {
	a, err := identity.New(identity.Config{
		APIKeys:   []identity.APIKey{{Key: "s3cret-agent-key", Subject: "agent-42", Groups: []string{"agents"}}},
		Anonymous: true,
	})
	if err != nil {
		panic(err)
	}
	defer a.Close()

	for _, auth := range []string{"Bearer s3cret-agent-key", "", "Bearer wrong-key"} {
		r := httptest.NewRequest("POST", "http://127.0.0.1:8080/tools/write_note", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		s, err := a.Authenticate(r)
		switch {
		case errors.Is(err, identity.ErrUnauthenticated):
			fmt.Println("401:", err)
		case err != nil:
			panic(err)
		default:
			fmt.Println(s.ID, s.Groups, s.Authenticated)
		}
	}
	// Output:
	// agent-42 [agents] true
	// anonymous [] false
	// 401: identity: bearer token: unknown API key
}
