package direct

import (
	"testing"

	"golang.org/x/net/http/httpguts"
)

// checkOutbound's tests of names and values are net/http's (httpguts,
// which its Transport uses) for every byte, alone and inside a string: a
// header the Transport would refuse is refused here too, and one it sends
// is sent.
func TestChecksAsNetHTTP(t *testing.T) {
	for b := range 256 {
		for _, s := range []string{string([]byte{byte(b)}), "X-" + string([]byte{byte(b)}) + "a"} {
			if got, want := isToken(s), httpguts.ValidHeaderFieldName(s); got != want {
				t.Errorf("isToken(%q) = %v, httpguts.ValidHeaderFieldName says %v", s, got, want)
			}
			if got, want := validFieldValue(s), httpguts.ValidHeaderFieldValue(s); got != want {
				t.Errorf("validFieldValue(%q) = %v, httpguts.ValidHeaderFieldValue says %v", s, got, want)
			}
		}
	}
	if isToken("") || httpguts.ValidHeaderFieldName("") {
		t.Error("the empty name is a token")
	}
}
