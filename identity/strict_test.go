package identity_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/toolgate/toolgate/internal/testkit"
)

// withMembers returns the JSON of claims with the members (JSON text such
// as `"sub":"admin"`) added at the end, after the members of the same name
// if there are any.
func withMembers(t testing.TB, claims map[string]any, members ...string) []byte {
	t.Helper()
	b := must(json.Marshal(claims))
	for _, m := range members {
		b = append(append(append(b[:len(b)-1], ','), m...), '}')
	}
	return b
}

// TestJWTStrictClaims checks that a signed token whose claims could be read
// two ways, or whose registered claims have another JSON type than RFC 7519
// gives them, is refused, whoever signed it.
func TestJWTStrictClaims(t *testing.T) {
	keys := testkit.NewKeys(t)
	a := newAuthenticator(t, jwtConfig(testkit.WriteJWKS(t, keys.JWKS(t))))
	future := strconv.FormatInt(time.Now().Add(5*time.Minute).Unix(), 10)
	const (
		invalid   = "identity: jwt: invalid claims"
		wrongType = "identity: jwt: registered claim of the wrong type"
	)
	tests := []struct {
		name    string
		payload []byte
		wantErr string // "" for a token that is accepted as user-1
	}{
		{name: "good", payload: withMembers(t, claims())},
		{name: "good, aud a string, jti a string", payload: withMembers(t, claims("aud", testAudience, "jti", "id-1"))},
		{name: "good, numbers with fraction and exponent", payload: withMembers(t, claims("exp", nil, "iat", nil), `"exp":`+future+`.5`, `"iat":1.7e9`)},

		{name: "sub twice", payload: withMembers(t, claims(), `"sub":"admin"`), wantErr: invalid},
		{name: "sub twice, same value", payload: withMembers(t, claims(), `"sub":"user-1"`), wantErr: invalid},
		{name: "sub twice, once escaped", payload: withMembers(t, claims(), `"s\u0075b":"admin"`), wantErr: invalid},
		{name: "exp twice", payload: withMembers(t, claims(), `"exp":`+future), wantErr: invalid},
		{name: "groups twice", payload: withMembers(t, claims(), `"groups":["admin"]`), wantErr: invalid},
		{name: "duplicate in a nested claim", payload: withMembers(t, claims(), `"ext":{"role":"user","role":"admin"}`), wantErr: invalid},
		{name: "names differing in case", payload: withMembers(t, claims(), `"Sub":"admin"`), wantErr: invalid},
		{name: "invalid UTF-8", payload: withMembers(t, claims(), "\"name\":\"\xff\""), wantErr: invalid},

		{name: "exp a numeric string", payload: withMembers(t, claims("exp", future)), wantErr: wrongType},
		{name: "exp null", payload: withMembers(t, claims("exp", nil), `"exp":null`), wantErr: wrongType},
		{name: "nbf a string", payload: withMembers(t, claims("nbf", "0")), wantErr: wrongType},
		{name: "iat a bool", payload: withMembers(t, claims("iat", true)), wantErr: wrongType},
		{name: "iss a number", payload: withMembers(t, claims("iss", 7)), wantErr: wrongType},
		{name: "iss null", payload: withMembers(t, claims("iss", nil), `"iss":null`), wantErr: wrongType},
		{name: "sub a number", payload: withMembers(t, claims("sub", 7)), wantErr: wrongType},
		{name: "sub an array", payload: withMembers(t, claims("sub", []string{"user-1"})), wantErr: wrongType},
		{name: "sub null", payload: withMembers(t, claims("sub", nil), `"sub":null`), wantErr: wrongType},
		{name: "aud a number", payload: withMembers(t, claims("aud", 7)), wantErr: wrongType},
		{name: "aud with a number", payload: withMembers(t, claims("aud", []any{testAudience, 7})), wantErr: wrongType},
		{name: "aud an object", payload: withMembers(t, claims("aud", map[string]any{testAudience: true})), wantErr: wrongType},
		{name: "aud null", payload: withMembers(t, claims("aud", nil), `"aud":null`), wantErr: wrongType},
		{name: "jti a number", payload: withMembers(t, claims("jti", 7)), wantErr: wrongType},
		{name: "jti null", payload: withMembers(t, claims(), `"jti":null`), wantErr: wrongType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token := testkit.Sign(t, jwa.ES256(), keys.EC, "ec", tt.payload, nil)
			got, err := a.Authenticate(request("Bearer " + token))
			if tt.wantErr != "" {
				checkErr(t, err, tt.wantErr, token)
				return
			}
			if err != nil || got.ID != "user-1" || got.Principal != user1 {
				t.Errorf("Authenticate() = %q (%q), %v; want user-1", got.ID, got.Principal, err)
			}
		})
	}
}
