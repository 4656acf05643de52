package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnvNames pins the mapping from variable names to keys for the keys
// that docs/configuration.md and the README name, and the list entry forms.
func TestEnvNames(t *testing.T) {
	ix := envNames()
	for name, path := range map[string]string{
		"TOOLGATE_LISTEN_PROXY":                      "listen.proxy",
		"TOOLGATE_PUBLIC_URL":                        "public_url",
		"TOOLGATE_PROXY_PUBLIC_URL":                  "proxy_public_url",
		"TOOLGATE_PENDING_REDIS_URL":                 "pending.redis_url",
		"TOOLGATE_PENDING_MAX_RESULT_BYTES":          "pending.max_result_bytes",
		"TOOLGATE_APPROVALS_SECRET":                  "approvals.secret",
		"TOOLGATE_IDENTITY_JWT_JWKS_FILE":            "identity.jwt.jwks_file",
		"TOOLGATE_POLICY_RULES_FILE":                 "policy.rules_file",
		"TOOLGATE_SHUTDOWN_GRACE":                    "shutdown_grace",
		"TOOLGATE_LIMITS_BODY_TIMEOUT":               "limits.body_timeout",
		"TOOLGATE_LIMITS_MAX_PARKED":                 "limits.max_parked",
		"TOOLGATE_LIMITS_MAX_PARKED_PER_SUBJECT":     "limits.max_parked_per_subject",
		"TOOLGATE_LIMITS_LOSSY_NUMBERS":              "limits.lossy_numbers",
		"TOOLGATE_LIMITS_MAX_CONNECTIONS":            "limits.max_connections",
		"TOOLGATE_LIMITS_MAX_CONNECTIONS_PER_SOURCE": "limits.max_connections_per_source",
		"TOOLGATE_POLICY_CAPABILITIES":               "policy.capabilities",
	} {
		if n := ix.keys[name]; n == nil || n.path != path {
			t.Errorf("%s maps to %v, want %s", name, n, path)
		}
	}

	var lists []string
	for _, l := range ix.lists {
		lists = append(lists, l.prefix+"<i>_"+l.example)
	}
	want := []string{
		"TOOLGATE_UPSTREAMS_<i>_NAME",
		"TOOLGATE_IDENTITY_API_KEYS_<i>_KEY",
		"TOOLGATE_HOOKS_<i>_NAME",
		"TOOLGATE_APPROVALS_APPROVERS_<i>_NAME",
		"TOOLGATE_APPROVALS_NOTIFY_<i>_URL",
	}
	if diff := cmp.Diff(want, lists); diff != "" {
		t.Errorf("list variables (-want +got):\n%s", diff)
	}
}

// TestEnvExemptionsHideNoKey keeps the names that are never errors
// (Kubernetes service links, TOOLGATE_CONFIG, TOOLGATE_TEST_*) apart from
// every name a key could have.
func TestEnvExemptionsHideNoKey(t *testing.T) {
	for _, n := range allPaths() {
		name := envName(strings.ReplaceAll(n.path, "[]", "_0"))
		if exemptEnv(name) {
			t.Errorf("key %s has the exempt variable name %s", n.path, name)
		}
	}
}

func TestSchemaCoversConfig(t *testing.T) {
	var leaves []string
	for _, n := range allPaths() {
		if n.leaf != notLeaf {
			leaves = append(leaves, n.path)
		}
	}
	// A sample; the point is that nested, pointer and list-entry keys are
	// all present with the right paths.
	for _, p := range []string{
		"listen.admin", "upstreams[].target_args", "identity.api_keys[].groups",
		"identity.jwt.leeway", "policy.watch", "approvals.notify[].secret", "log.arguments", "shutdown_grace",
	} {
		if !slices.Contains(leaves, p) {
			t.Errorf("schema has no leaf %s; leaves: %v", p, leaves)
		}
	}
	if n := lookupPath("upstreams.url"); n != nil {
		t.Errorf("lookupPath reached into a list: %v", n.path)
	}
}

// TestLeafKinds pins the kind of the keys whose Go type decides how they are
// read, checked and printed.
func TestLeafKinds(t *testing.T) {
	kinds := map[string]leafKind{}
	for _, n := range allPaths() {
		kinds[n.path] = n.leaf
	}
	for path, want := range map[string]leafKind{
		"limits.max_body_bytes":         leafByteSize,
		"limits.body_timeout":           leafDuration,
		"limits.max_parked_per_subject": leafInt,
		"limits.max_parked":             leafInt,
		"limits.lossy_numbers":          leafString,
		"upstreams[].tool_query":        leafBool,
		"upstreams[].target_fold":       leafString,
		"upstreams[].strip_headers":     leafStrings,
		"policy.capabilities":           leafStrings,
	} {
		if got, ok := kinds[path]; !ok || got != want {
			t.Errorf("%s: leaf kind %d (present %v), want %d", path, got, ok, want)
		}
	}
	ix := envNames()
	for rel, path := range map[string]string{
		"TOOL_QUERY": "upstreams[].tool_query", "TARGET_FOLD": "upstreams[].target_fold", "STRIP_HEADERS": "upstreams[].strip_headers",
	} {
		if n := ix.lists[0].fields[rel]; n == nil || n.path != path {
			t.Errorf("TOOLGATE_UPSTREAMS_<i>_%s maps to %v, want %s", rel, n, path)
		}
	}
}

func TestIntLeaf(t *testing.T) {
	n := lookupPath("limits.max_parked")
	for _, tt := range []struct {
		in   any
		want any // an int, or nil for an error
	}{
		{7, 7},
		{int64(7), 7},
		{uint8(7), 7},
		{float64(1e4), 10000},
		{-3, -3},
		{2.5, nil},
		{"7", nil},
		{true, nil},
		{nil, nil},
		{[]any{1}, nil},
		{1e40, nil},
	} {
		got, err := checkLeaf(n, tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("checkLeaf(%#v) = %#v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("checkLeaf(%#v) = %#v, %v; want %#v", tt.in, got, err, tt.want)
		}
	}
	// As in the file, a float with no fraction is a whole number (1e3).
	for in, want := range map[string]any{"42": 42, " 42 ": 42, "-1": -1, "": nil, "4.2": nil, "1e3": 1000, "inf": nil, "NaN": nil, "42k": nil, "99999999999999999999": nil} {
		got, err := leafFromString(n, in)
		if want == nil {
			if err == nil {
				t.Errorf("leafFromString(%q) = %#v, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("leafFromString(%q) = %#v, %v; want %#v", in, got, err, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		s    string
		cand []string
		want string
	}{
		{"redis_ur", []string{"store", "redis_url", "hold"}, "redis_url"},
		{"nmae", []string{"name", "url"}, "name"},
		{"dir", []string{"url", "mode"}, ""},
		{"zzzzzzzz", []string{"redis_url"}, ""},
		{"TOOLGATE_PENDING_REDIS_UR", []string{"TOOLGATE_PENDING_REDIS_URL", "TOOLGATE_PENDING_HOLD"}, "TOOLGATE_PENDING_REDIS_URL"},
	}
	for _, tt := range tests {
		if got := closest(tt.s, tt.cand); got != tt.want {
			t.Errorf("closest(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
}
