package policy

import (
	"net/url"
	"path"
	"strings"
)

// DefaultTargetArgs are the argument names searched for a call's target, in
// order, when an upstream does not name its own.
var DefaultTargetArgs = []string{"path", "file_path", "file", "filename", "target", "url", "uri", "command"}

// NewTool builds a Tool whose target is the first string argument named in
// targetArgs, normalised by NormalizeTarget.
func NewTool(name string, args map[string]any, targetArgs []string) *Tool {
	t := &Tool{Name: name, Arguments: args}
	for _, k := range targetArgs {
		s, ok := argFold(args, k)
		if !ok {
			continue
		}
		t.HasTarget = true
		t.TargetRaw = s
		t.Target, t.TargetEscapes = NormalizeTarget(k, s)
		break
	}
	return t
}

// argFold returns the string argument named k, matching the name the way
// Go's encoding/json matches struct fields (case-insensitively): a tool
// written in Go reads {"PATH": …} as its path argument, so the policy must
// see it as the target too. Bodies with two case-variant keys never get
// here (they are refused as ambiguous).
func argFold(args map[string]any, k string) (string, bool) {
	if v, ok := args[k].(string); ok {
		return v, true
	}
	for name, v := range args {
		if strings.EqualFold(name, k) {
			s, ok := v.(string)
			return s, ok
		}
	}
	return "", false
}

// NormalizeTarget normalises the value of argument arg so that one resource
// has one spelling for the policy: backslashes become slashes, path.Clean
// applies, a leading "./" goes. escapes is true when the cleaned path climbs
// above its root ("..", "../x").
//
// Two kinds of value are not file paths and are treated apart, because
// cleaning would change their meaning: a URL (argument "url" or "uri", or any
// value with a scheme) keeps its scheme and host (lower-cased) and has only
// its path cleaned; a "command" is passed through unchanged.
func NormalizeTarget(arg, raw string) (target string, escapes bool) {
	if raw == "" || arg == "command" {
		return raw, false
	}
	if u, ok := asURL(arg, raw); ok {
		return u, false
	}
	p := path.Clean(strings.ReplaceAll(raw, `\`, "/"))
	escapes = p == ".." || strings.HasPrefix(p, "../")
	return p, escapes
}

// asURL normalises raw as a URL when it is one.
func asURL(arg, raw string) (string, bool) {
	i := strings.Index(raw, "://")
	if i <= 0 && arg != "url" && arg != "uri" {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return "", false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if u.Path != "" {
		trailing := strings.HasSuffix(u.Path, "/")
		u.Path = path.Clean("/" + u.Path)
		if trailing && u.Path != "/" {
			u.Path += "/"
		}
		u.RawPath = ""
	}
	return u.String(), true
}
