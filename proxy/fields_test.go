package proxy

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/policy"
)

// TestFieldsReadAlike: a request whose method or header fields upstreams
// read otherwise than the policy does is refused before anything is
// decided, and the upstream receives nothing: even with a policy that
// allows everything.
func TestFieldsReadAlike(t *testing.T) {
	many := func(n int) [][2]string {
		var h [][2]string
		for i := range n {
			h = append(h, [2]string{"X-Pad-" + strconv.Itoa(i), "1"})
		}
		return h
	}
	for _, tc := range []struct {
		name, method, path string
		header             [][2]string
		want               int
	}{
		{"a lower-case method", "post", "/files", nil, http.StatusMethodNotAllowed},
		{"a mixed-case method", "Delete", "/files/a", nil, http.StatusMethodNotAllowed},
		{"a tool read with GET", http.MethodGet, "/tools/write_file", nil, http.StatusMethodNotAllowed},
		{"a tool with PUT", http.MethodPut, "/tools/write_file", nil, http.StatusMethodNotAllowed},
		{"a tool with OPTIONS", http.MethodOptions, "/tools/write_file", nil, http.StatusMethodNotAllowed},
		{"a plain GET", http.MethodGet, "/files/a", nil, http.StatusOK},
		{"a header twice", http.MethodPost, "/files", [][2]string{{"X-Dry-Run", "true"}, {"X-Dry-Run", "false"}}, http.StatusBadRequest},
		{"a list header twice", http.MethodPost, "/files", [][2]string{{"Accept", "text/plain"}, {"Accept", "application/json"}}, http.StatusOK},
		// With the client's own (User-Agent, Content-Type, Authorization,
		// Accept-Encoding, Content-Length), one field over.
		{"too many header fields", http.MethodPost, "/files", many(maxHeaderFields - 4), http.StatusRequestHeaderFieldsTooLarge},
		{"as many header fields as taken", http.MethodPost, "/files", many(maxHeaderFields - 5), http.StatusOK},
		// Approvers are shown at most callinfo.MaxHeaderName bytes of a name.
		{"a header name too long", http.MethodPost, "/files", [][2]string{{"X-" + strings.Repeat("A", callinfo.MaxHeaderName-1), "1"}}, http.StatusRequestHeaderFieldsTooLarge},
		{"a header name as long as shown", http.MethodPost, "/files", [][2]string{{"X-" + strings.Repeat("A", callinfo.MaxHeaderName-2), "1"}}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestServer(t, allowAll)
			body := "{}"
			if bodyless(tc.method) {
				body = "" // TestBodyOnBodylessMethodRefused
			}
			req, err := http.NewRequest(tc.method, env.url+tc.path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer agent-key")
			req.Header.Set("Content-Type", "application/json")
			for _, kv := range tc.header {
				req.Header.Add(kv[0], kv[1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if n := len(env.upstream.Requests()); (n == 1) != (tc.want == http.StatusOK) {
				t.Fatalf("the upstream got %d requests", n)
			}
			if tc.want == http.StatusMethodNotAllowed && res.Header.Get("Allow") == "" {
				t.Error("a 405 without Allow")
			}
		})
	}
}

// TestClaimsNeverForwarded: the client address and identity headers that
// CDNs and authenticating proxies set, and frameworks believe, never reach
// an upstream from an agent; the policy does not see them either.
func TestClaimsNeverForwarded(t *testing.T) {
	claims := []string{
		"True-Client-IP", "X-Client-IP", "Client-IP", "CF-Connecting-IP", "Fastly-Client-IP", "X-Cluster-Client-IP",
		"X-Originating-IP", "X-Forwarded", "Forwarded-For", "Remote-User", "Remote-Groups", "X-Authentik-Username",
		"X-Auth-Request-User", "X-Auth-Request-Groups", "X-Webauth-User", "X-Ms-Client-Principal-Name",
		"X-Amzn-Oidc-Identity", "X-Goog-Authenticated-User-Email", "Cf-Access-Authenticated-User-Email",
		"X-Pomerium-Claim-Email", "X-User", "X-User-Id", "X-Email", "X-Auth-User", "X-Username",
		"Fly-Client-IP", "Proxy-Client-IP", "WL-Proxy-Client-IP", "X-Azure-ClientIP", "X-AppEngine-User-IP",
		"X-Vercel-Forwarded-For", "X-Vouch-User", "X-Consumer-Username", "X-Userinfo", "X-Goog-IAP-JWT-Assertion",
		"X-Apigateway-Api-Userinfo", "X-SSL-Client-S-DN", "X-Client-Cert", "SSL-Client-Verify",
		"Tailscale-User-Login", "X-AppEngine-User-Email", "X-CloudTasks-QueueName", "X-Endpoint-API-Userinfo",
		"X-ARR-ClientCert", "X-Amzn-Mtls-Clientcert", "X-Credential-Identifier", "X-Anonymous-Consumer",
	}
	var seen []string
	env := newTestServer(t, deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		for k := range in.HTTP.Headers {
			seen = append(seen, k)
		}
		return allowAll(context.Background(), in)
	}))
	args := []string{"Authorization", "Bearer agent-key", "X-Kept", "1"}
	for _, k := range claims {
		args = append(args, k, "admin")
	}
	if res := post(t, env.url+"/files", "{}", args...); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := env.upstream.Requests()[0].Header
	for _, k := range claims {
		if v := got.Values(k); len(v) > 0 {
			t.Errorf("the upstream got %s: %q", k, v)
		}
		if slices.Contains(seen, strings.ToLower(k)) {
			t.Errorf("the policy saw %s", k)
		}
	}
	if got.Get("X-Kept") != "1" || !slices.Contains(seen, "x-kept") {
		t.Error("an ordinary header was dropped")
	}
}

// TestLooseArgumentSpellings: a target argument sent under a spelling a
// loose binder reads as it (filePath for file_path, as encoding/json/v2's
// case:ignore and pydantic's camel-case aliases read it) is judged as that
// target; two arguments a binder reads as one are refused.
func TestLooseArgumentSpellings(t *testing.T) {
	env := newTestServer(t, seedEngineRules(t, `rules:
  - {id: docs, effect: allow, tool: "*", target: "docs/**"}
  - {id: secrets, effect: deny, tool: "*", target: "secrets/**"}
`))
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"path":"docs/a"}`, http.StatusOK},
		{`{"path":"docs/a","filePath":"secrets/key"}`, http.StatusForbidden},
		{`{"path":"docs/a","f_i_l_e-p_a_t_h":"secrets/key"}`, http.StatusForbidden},
		{`{"path":"docs/a","file_path":"docs/b","filePath":"docs/c"}`, http.StatusBadRequest},
	} {
		res := post(t, env.url+"/tools/read_file", tc.body, "Authorization", "Bearer agent-key")
		if res.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.body, res.StatusCode, tc.want)
		}
	}
	if n := len(env.upstream.Requests()); n != 1 {
		t.Errorf("the upstream got %d calls, want the one allowed", n)
	}
}

// TestMethodOverrideRefused: a _method field, which Rails, Laravel, Hono
// and Express's method-override take as the request's method, is refused
// wherever it cannot be stripped: in the query, in a form or multipart
// body, in a JSON body, in a tool call's arguments.
func TestMethodOverrideRefused(t *testing.T) {
	multipart := "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n"
	for _, tc := range []struct {
		name, path, ctype, body string
		want                    int
	}{
		{"in the query", "/purge?_method=DELETE", "application/json", `{}`, http.StatusBadRequest},
		{"in a form", "/purge", "application/x-www-form-urlencoded", `a=1&_method=DELETE`, http.StatusBadRequest},
		{"escaped in a form", "/purge", "application/x-www-form-urlencoded", `a=1&%5Fmethod=DELETE`, http.StatusBadRequest},
		{"in a multipart form", "/purge", "multipart/form-data; boundary=b", multipart, http.StatusBadRequest},
		{"in a JSON body", "/purge", "application/json", `{"_method":"DELETE"}`, http.StatusBadRequest},
		{"in a tool's arguments", "/tools/purge", "application/json", `{"path":"a","_METHOD":"DELETE"}`, http.StatusBadRequest},
		{"a form without it", "/purge", "application/x-www-form-urlencoded", `a=1&method=x`, http.StatusOK},
		{"a letter escaped in a form", "/purge", "application/x-www-form-urlencoded", `a=1&_m%65thod=DELETE`, http.StatusBadRequest},
		{"all escaped, twice", "/purge", "application/x-www-form-urlencoded", `a=1&%255F%256D%2565thod=DELETE`, http.StatusBadRequest},
		{"a form without a Content-Type", "/purge", "", `_method=DELETE`, http.StatusBadRequest},
		{"a form type with a comma", "/purge", "application/x-www-form-urlencoded, text/plain", `_method=DELETE`, http.StatusBadRequest},
		{"JSON after a byte order mark", "/purge", "application/json", "\ufeff{\"_method\":\"DELETE\"}", http.StatusBadRequest},
		{"JSON as text/json", "/purge", "text/json", `{"_method":"DELETE"}`, http.StatusBadRequest},
		{"JSON text that mentions it", "/purge", "application/json", `{"code":"def _method; end"}`, http.StatusOK},
		{"in the query in brackets", "/purge?_method%5B%5D=DELETE", "application/json", `{}`, http.StatusBadRequest},
		{"in the query as qs' root", "/purge?%5B_method%5D=DELETE", "application/json", `{}`, http.StatusBadRequest},
		// Bodies encoding/json does not read, which other readers do.
		{"JSON in UTF-16", "/purge", "application/json", utf16LE(`{"_method":"DELETE"}`), http.StatusBadRequest},
		{"JSON in UTF-16 with a byte order mark", "/purge", "text/plain", "\xff\xfe" + utf16LE(`{"_method":"DELETE"}`), http.StatusBadRequest},
		{"JSON nested past encoding/json's depth", "/purge", "application/json", `{"_method":"DELETE","x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, http.StatusBadRequest},
		{"escaped in unreadable JSON", "/purge", "application/json", `{"\u005fmethod":"DELETE",}`, http.StatusBadRequest},
		{"unreadable JSON without it", "/purge", "application/json", `{"a":1,}`, http.StatusOK},
		// Charsets the scans above do not read the body in.
		{"JSON in UTF-7", "/purge", "application/json; charset=utf-7", `{"+AF8-method":"DELETE"}`, http.StatusUnsupportedMediaType},
		{"a form in UTF-16", "/purge", "application/x-www-form-urlencoded; charset=utf-16", `a=1`, http.StatusUnsupportedMediaType},
		{"charset* beside a charset", "/purge", "application/json; charset=utf-7; charset*=utf-8''utf-8", `{}`, http.StatusUnsupportedMediaType},
		{"two charsets", "/purge", "text/plain; charset=utf-8; charset=utf-7", `x`, http.StatusUnsupportedMediaType},
		{"text in Latin-1", "/purge", "text/plain; charset=iso-8859-1", "caf\xe9", http.StatusOK},
		{"a form in Latin-1 (Apache HttpClient's)", "/purge", "application/x-www-form-urlencoded; charset=ISO-8859-1", "a=caf\xe9", http.StatusOK},
		{"a form in Windows-1252", "/purge", "application/x-www-form-urlencoded; charset=windows-1252", "a=1", http.StatusOK},
		{"a form in UTF-16, spelt without the hyphen", "/purge", "application/x-www-form-urlencoded; charset=utf16", `a=1`, http.StatusUnsupportedMediaType},
		{"JSON in Shift_JIS", "/purge", "application/json; charset=shift_jis", `{}`, http.StatusUnsupportedMediaType},
		{"JSON in UTF-8, declared", "/purge", "application/json; charset=UTF-8", `{"a":1}`, http.StatusOK},
		{"JSON in UTF-7 as text", "/purge", "text/plain; charset=utf-7", `{"+AF8-method":"DELETE"}`, http.StatusUnsupportedMediaType},
		{"JSON in UTF-7 as octets", "/purge", "application/octet-stream; charset=UNICODE-1-1-UTF-7", `{"+AF8-method":"DELETE"}`, http.StatusUnsupportedMediaType},
		{"text in EBCDIC", "/purge", "text/plain; charset=ibm037", "\x81", http.StatusUnsupportedMediaType},
		{"CSV in Shift_JIS", "/purge", "text/csv; charset=Shift_JIS", "a,b\r\n\x93\xfa,1\r\n", http.StatusOK},
		// PHP reads "." in a name as "_": Laravel and Symfony take
		// .method=DELETE as _method.
		{"in the query with a dot", "/purge?.method=DELETE", "application/json", `{}`, http.StatusBadRequest},
		{"in the query with an escaped dot", "/purge?%2Emethod=DELETE", "application/json", `{}`, http.StatusBadRequest},
		{"in a form with a dot", "/purge", "application/x-www-form-urlencoded", `a=1&.method=DELETE`, http.StatusBadRequest},
		{"in a form with an escaped dot", "/purge", "application/x-www-form-urlencoded", `a=1&%2Emethod=DELETE`, http.StatusBadRequest},
		{"in a form with a dot after spaces", "/purge", "application/x-www-form-urlencoded", `a=1&++.method=DELETE`, http.StatusBadRequest},
		// A Fetch body reader (undici, Deno, Bun, Workers) takes the last
		// entry of a list of types, PHP and Rack the first.
		{"in a multipart form behind a form type", "/purge", "application/x-www-form-urlencoded, multipart/form-data; boundary=b", multipart, http.StatusBadRequest},
		{"in a multipart form behind an empty type", "/purge", ", multipart/form-data; boundary=b", multipart, http.StatusBadRequest},
		{"in a multipart form behind a text type", "/purge", "text/plain, multipart/form-data; boundary=b", multipart, http.StatusBadRequest},
		// body-parser drops a byte order mark; formidable (koa-body) reads
		// any type that names urlencoded or multipart as such.
		{"in a form after a byte order mark", "/purge", "application/x-www-form-urlencoded", "\ufeff_method=DELETE", http.StatusBadRequest},
		{"in a form of a type that names urlencoded", "/purge", "text/plain; x=urlencoded", "_method=DELETE", http.StatusBadRequest},
		{"in a form of a made-up urlencoded type", "/purge", "application/x-urlencoded", "_method=DELETE", http.StatusBadRequest},
		{"in a multipart form of a type that names multipart", "/purge", "text/plain; note=multipart; boundary=b", multipart, http.StatusBadRequest},
		{"in a multipart form with a dot", "/purge", "multipart/form-data; boundary=b", strings.Replace(multipart, `"_method"`, `".method"`, 1), http.StatusBadRequest},
		{"a form value with a dotted method", "/purge", "application/x-www-form-urlencoded", `code=obj.method()`, http.StatusOK},
		{"a form value that is a dotted method", "/purge", "application/x-www-form-urlencoded", `q=.method&selector=.method-list`, http.StatusOK},
		// Only a field's name binds as the method: a name that ends in
		// _method (Stripe's payment_method), a value that holds it, and a
		// name nested under another do not.
		{"a form field named payment_method", "/purge", "application/x-www-form-urlencoded", `amount=100&payment_method=pm_card_visa`, http.StatusOK},
		{"a form value that mentions it", "/purge", "application/x-www-form-urlencoded", `note=see+the+_method+field&x=_method`, http.StatusOK},
		{"a form field nested under another", "/purge", "", `x[_method]=DELETE`, http.StatusOK},
		{"in a form as qs' root", "/purge", "application/x-www-form-urlencoded", `a=1&%5B_method%5D=DELETE`, http.StatusBadRequest},
		{"in a form after Rack's leading brackets", "/purge", "application/x-www-form-urlencoded", `a=1&]]_method=DELETE`, http.StatusBadRequest},
		{"in a form as a list", "/purge", "application/x-www-form-urlencoded", `a=1&_method[]=DELETE`, http.StatusBadRequest},
		{"in a form, cut at a NUL", "/purge", "application/x-www-form-urlencoded", `a=1&_method%00x=DELETE`, http.StatusBadRequest},
		{"in a form after a semicolon", "/purge", "application/x-www-form-urlencoded", `a=1;_method=DELETE`, http.StatusBadRequest},
		// Parsers cut the body at a raw "&" before they decode: an escaped
		// one is part of a value.
		{"in a value, escaped with its separators", "/purge", "application/x-www-form-urlencoded", `next=%2Fposts%2F1%3Fpage%3D2%26_method%3Ddelete&a=1%26_method%3DDELETE`, http.StatusOK},
		{"in a form, upper case", "/purge", "application/x-www-form-urlencoded", `_METHOD=DELETE`, http.StatusBadRequest},
		{"a dotted name after a vertical tab", "/purge", "application/x-www-form-urlencoded", "a=1&\v.method=DELETE", http.StatusBadRequest},
		{"in a multipart form, unquoted after a vertical tab", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\v.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, on a folded line", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\r\n\t.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, quoted after a form feed", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"\f.method\"\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, the header's first pair", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: name=\".method\"\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, after the colon", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition:name=.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, the name split over a line", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; na\r\nme=.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, the value split over a line", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=.me\r\nthod\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, _method split over a line", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=_me\r\nthod\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		// PHP looks for no delimiter among a part's headers, decodes no
		// percent-escape there, and reads each line up to a NUL.
		{"in a multipart form, behind a header line that starts with --", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; x=\"\r\n--\"; name=\".method\"\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, behind an escaped empty line", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; x=\"%0D%0A%0D%0A\"; name=\".method\"\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, joined after a NUL", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=_me\x00junk\r\nthod\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, quoted, joined after a NUL", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\".me\x00junk\r\nthod\"\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		// And as PHP reads quotes, folded lines and long lines there.
		{"in a multipart form, after a backslash-escaped quote", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; a=\"\\\"; b=\"; name=.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, on a folded line holding a colon", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=f\r\n ; name=.method; x=\":\"\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, after a header line longer than PHP's buffer", "/purge", "multipart/form-data; boundary=b", "--b\r\nX-Pad: \"" + strings.Repeat("a", 5120) + "Content-Disposition: form-data; name=.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"in a multipart form, after a long preamble line", "/purge", "multipart/form-data; boundary=b", strings.Repeat("p", 5120) + "--b\r\nContent-Disposition: form-data; name=.method\r\n\r\nDELETE\r\n--b--\r\n", http.StatusBadRequest},
		{"a multipart upload with long content lines", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\n" + strings.Repeat("x", 20000) + "\r\n--b--\r\n", http.StatusOK},
		// A content line that starts with "--" is no delimiter: a long line
		// after it is content.
		{"an SQL file uploaded in a multipart form", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"seed.sql\"\r\nContent-Type: application/octet-stream\r\n\r\n-- seed data\nINSERT INTO t VALUES " + strings.Repeat("(1),", 1600) + "(1);\r\n--b--\r\n", http.StatusOK},
		{"a YAML file uploaded in a multipart form", "/purge", "multipart/form-data; boundary=\"b\"", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.yaml\"\r\n\r\n---\ncert: " + strings.Repeat("QUJD", 2048) + "\r\n--b--\r\n", http.StatusOK},
		{"a multipart field named payment.method", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"payment.method\"\r\n\r\ncard\r\n--b--\r\n", http.StatusOK},
		{"a multipart file named notes.method", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"notes.method\"\r\n\r\nx\r\n--b--\r\n", http.StatusOK},
		{"a script uploaded in a multipart form", "/purge", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.js\"\r\n\r\n$('.method-row').hide()\r\n--b--\r\n", http.StatusOK},
		// PHP cuts a Content-Type at a space: this is a form to it.
		{"a form type with a word after a space", "/purge", "application/x-www-form-urlencoded x", `a=1&_method=DELETE`, http.StatusBadRequest},
		{"JSON in ISO-2022-JP as text", "/purge", "text/plain; charset=iso-2022-jp", "{\"_me\x1b(Bthod\":\"DELETE\"}", http.StatusUnsupportedMediaType},
		{"text in UTF-16", "/purge", "text/plain; charset=utf-16", "\xff\xfeh\x00i\x00", http.StatusOK},
		{"octets in charset binary", "/purge", "application/octet-stream; charset=binary", "\x00\x01\x02\x03", http.StatusOK},
		{"text in Windows-874", "/purge", "text/plain; charset=windows-874", "\xa1\xa2", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestServer(t, allowAll, func(c *Config) { c.MaxBodyBytes = 64 << 10 })
			res := post(t, env.url+tc.path, tc.body, "Authorization", "Bearer agent-key", "Content-Type", "", "Content-Type", tc.ctype)
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if n := len(env.upstream.Requests()); (n == 1) != (tc.want == http.StatusOK) {
				t.Fatalf("the upstream got %d requests", n)
			}
		})
	}
}

// send sends an agent's request of method to url with body and the
// header pairs kv, and returns the closed response.
func send(t *testing.T, method, url, body string, kv ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer agent-key")
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// utf16LE is s, ASCII, in UTF-16LE.
func utf16LE(s string) string {
	b := make([]byte, 0, 2*len(s))
	for i := range len(s) {
		b = append(b, s[i], 0)
	}
	return string(b)
}

// TestBodyOnBodylessMethodRefused: a plain HTTP GET, HEAD, OPTIONS or TRACE
// with a body is refused before the policy: the body is not part of what
// the policy decides, and an upstream that leaves it unread takes it for
// the next request on the connection. A DELETE's body and a bodiless GET
// go through.
func TestBodyOnBodylessMethodRefused(t *testing.T) {
	smuggled := "POST /admin/delete HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace} {
		env := newTestServer(t, allowAll)
		res := send(t, method, env.url+"/status", smuggled)
		if res.StatusCode != http.StatusBadRequest || len(env.upstream.Requests()) != 0 {
			t.Errorf("%s with a body: status %d, upstream got %d requests; want 400 and none", method, res.StatusCode, len(env.upstream.Requests()))
		}
	}
	env := newTestServer(t, allowAll)
	for _, tc := range []struct{ method, body string }{{http.MethodGet, ""}, {http.MethodDelete, `{"purge":true}`}} {
		if res := send(t, tc.method, env.url+"/status", tc.body); res.StatusCode != http.StatusOK {
			t.Errorf("%s with body %q: status %d, want 200", tc.method, tc.body, res.StatusCode)
		}
	}
	if n := len(env.upstream.Requests()); n != 2 {
		t.Errorf("the upstream got %d requests, want 2", n)
	}
}

// TestPlainCallChecksOnEveryUpstream: a plain HTTP call is held to the same
// checks on an MCP upstream (a path other than its mcp_path) as on a REST
// one: a body on GET or OPTIONS, a charset the body could be read in other
// than toolgate reads it, and _method in the body or the query are refused
// before the upstream.
func TestPlainCallChecksOnEveryUpstream(t *testing.T) {
	smuggled := "POST /admin/delete HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	mcpUp := func(c *Config) { c.Upstreams[0].Protocol = "mcp"; c.Upstreams[0].MCPPath = "/mcp" }
	for _, tc := range []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"GET with a body", http.MethodGet, "/status", "text/plain", smuggled, http.StatusBadRequest},
		{"OPTIONS with a body", http.MethodOptions, "/status", "text/plain", smuggled, http.StatusBadRequest},
		{"JSON in UTF-7", http.MethodPost, "/purge", "application/json; charset=utf-7", `{"+AF8-method":"DELETE"}`, http.StatusUnsupportedMediaType},
		{"charset* beside charset", http.MethodPost, "/purge", "application/json; charset=utf-7; charset*=utf-8''utf-8", `{}`, http.StatusUnsupportedMediaType},
		{"_method in a JSON body", http.MethodPost, "/purge", "application/json", `{"_method":"DELETE"}`, http.StatusBadRequest},
		{"_method in a form", http.MethodPost, "/purge", "application/x-www-form-urlencoded", `_method=DELETE`, http.StatusBadRequest},
		{"_method in the query", http.MethodPost, "/purge?_method=DELETE", "application/json", `{}`, http.StatusBadRequest},
	} {
		for _, proto := range []string{"rest", "mcp"} {
			var env *testEnv
			if proto == "mcp" {
				env = newTestServer(t, allowAll, mcpUp)
			} else {
				env = newTestServer(t, allowAll)
			}
			res := send(t, tc.method, env.url+tc.path, tc.body, "Content-Type", tc.ctype)
			if res.StatusCode != tc.want || len(env.upstream.Requests()) != 0 {
				t.Errorf("%s upstream, %s: status %d, upstream got %d; want %d and none", proto, tc.name, res.StatusCode, len(env.upstream.Requests()), tc.want)
			}
		}
	}
}

// TestMethodOverrideQueryOnMCPEndpoint: on an MCP upstream with tool_query,
// a query on the MCP endpoint naming _method is refused, as on every other
// path, whatever the message.
func TestMethodOverrideQueryOnMCPEndpoint(t *testing.T) {
	env := newTestServer(t, allowAll, func(c *Config) {
		c.Upstreams[0].Protocol = "mcp"
		c.Upstreams[0].MCPPath = "/mcp"
		c.Upstreams[0].ToolQuery = true
	})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"docs/a"}}}`,
	} {
		env.upstream.Reset()
		res := send(t, http.MethodPost, env.url+"/mcp?_method=DELETE", body, "Content-Type", "application/json",
			"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-06-18")
		if n := len(env.upstream.Requests()); n != 0 {
			t.Errorf("POST /mcp?_method=DELETE %s: status %d, upstream got %d request(s); want 400 and none", body, res.StatusCode, n)
		}
	}
}

// TestCharsetNames: the charsets a JSON or form body may be declared in
// are ASCII's one-byte supersets by their names and aliases; names of no
// charset, and charsets that spell ASCII otherwise, are not.
func TestCharsetNames(t *testing.T) {
	for _, cs := range []string{"utf-8", "utf8", "us-ascii", "iso-8859-1", "iso8859-15", "iso_8859-1", "l1", "cp819", "windows-1252", "cp1250", "x-cp1252"} {
		if !asciiSuperset(cs) {
			t.Errorf("asciiSuperset(%q) = false", cs)
		}
	}
	for _, cs := range []string{"iso-8859-0", "iso-8859-12", "iso-8859-99", "iso8859-00", "windows-1259", "windows-12599", "cp12500", "utf-7", "utf-16", "shift_jis", "ibm037", ""} {
		if asciiSuperset(cs) {
			t.Errorf("asciiSuperset(%q) = true", cs)
		}
	}
}
