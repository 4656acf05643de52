package proxy

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policy"
)

// toolName is the grammar of a tool name after routing (docs/http-api.md,
// REST tool calls): ^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$, checked byte by
// byte, since every tool call is checked (TestToolNameGrammar holds it to
// the regular expression).
var toolName toolNameGrammar

type toolNameGrammar struct{}

func (toolNameGrammar) MatchString(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_':
		case i > 0 && (c == '.' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// checkPath refuses request paths that two HTTP stacks could read
// differently, so that the path the policy sees is the path the upstream
// routes: dot segments, empty segments, backslashes, encoded slashes,
// backslashes, dots or NULs, matrix parameters and control characters.
// Paths are never cleaned instead: cleaning would make toolgate one more
// stack with its own reading.
func checkPath(r *http.Request) (url.Values, *answer) {
	raw := r.URL.EscapedPath()
	if raw == "" || raw[0] != '/' {
		return nil, invalid(http.StatusBadRequest, "Bad path", "the request path must start with /")
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c < 0x20 || c == 0x7f || c == '\\' || c == ';' {
			return nil, invalid(http.StatusBadRequest, "Bad path", "the request path holds a control character, a backslash or a ';'")
		}
	}
	// The path the policy reads (input.http.path) is the decoded one. A
	// decoded control character (%0A, %0D, %7F, NEL) is one an upstream
	// may cut the path at or drop, and bytes that are not UTF-8 read as
	// U+FFFD to the policy's JSON and to Python's unquote: %FF and %FE
	// would be one path to them, and two to another stack.
	if p := r.URL.Path; !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return nil, invalid(http.StatusBadRequest, "Bad path", "the request path holds a percent-encoded control character, or bytes that are not UTF-8 once decoded")
	}
	lower := strings.ToLower(raw)
	// Encoded once or more: an application that decodes its parameter
	// once more than its router did reads %252e%252e as "..".
	for range 4 {
		if !strings.Contains(lower, "%25") {
			break
		}
		lower = strings.ReplaceAll(lower, "%25", "%")
	}
	for _, enc := range []string{"%2f", "%5c", "%2e", "%00", "%3b"} {
		if strings.Contains(lower, enc) {
			return nil, invalid(http.StatusBadRequest, "Bad path", "the request path holds an encoded (or twice encoded) '/', '\\', '.', ';' or NUL")
		}
	}
	// A percent-encoded unreserved character (%74 for t) has a second
	// spelling of the same path: routing on one and executing the other
	// would let "/%74ools/x" pass as a plain HTTP call and run as a tool.
	for i := 0; i+2 < len(raw); i++ {
		if raw[i] == '%' && isUnreservedEscape(raw[i+1], raw[i+2]) {
			return nil, invalid(http.StatusBadRequest, "Bad path", "the request path percent-encodes a character that needs no encoding")
		}
	}
	for seg := range strings.SplitSeq(raw[1:], "/") {
		if seg == "." || seg == ".." {
			return nil, invalid(http.StatusBadRequest, "Bad path", "the request path holds a '.' or '..' segment")
		}
	}
	if strings.Contains(raw, "//") {
		return nil, invalid(http.StatusBadRequest, "Bad path", "the request path holds an empty segment ('//')")
	}
	// Go's server keeps a raw '#' in the query, and so does the policy's
	// reading of it; most other stacks (Node's and Python's URL parsers)
	// read it as the start of a fragment and drop what follows: the
	// upstream would act on fewer names than the policy judged. A client
	// sends '#' as %23.
	if strings.IndexByte(r.URL.RawQuery, '#') >= 0 {
		return nil, invalid(http.StatusBadRequest, "Bad query", "the query string holds a raw '#' (send it as %23): an upstream may read what follows as a fragment")
	}
	// Stacks stop reading a query after a count of parts (Express's qs
	// and Node's querystring at 1,000, PHP's max_input_vars), empty ones
	// included, and drop the rest without a word: a name the policy read
	// past that count would never reach the upstream.
	if strings.Count(r.URL.RawQuery, "&") >= maxQueryParts {
		return nil, invalid(http.StatusBadRequest, "Bad query", "the query string has more than "+strconv.Itoa(maxQueryParts)+" parts: some upstreams drop the parts past a count of their own")
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad query", "the query string cannot be parsed")
	}
	for name, vs := range q {
		// PHP ends a name at a NUL ("dry_run%00" is dry_run): a control
		// character makes a name another stack's other name.
		if strings.IndexFunc(name, unicode.IsControl) >= 0 {
			return nil, invalid(http.StatusBadRequest, "Bad query", "a query name holds a control character")
		}
		// As in the path: bytes that are not UTF-8 are U+FFFD to some
		// readers and themselves to others.
		if !utf8.ValidString(name) || !utf8.ValidString(vs[0]) {
			return nil, invalid(http.StatusBadRequest, "Bad query", "a query name or value is not UTF-8 once decoded")
		}
		// Stacks disagree on a repeated name (first, last, a list): the
		// policy could judge one value and the upstream use another.
		if len(vs) > 1 {
			return nil, invalid(http.StatusBadRequest, "Bad query", "the query string names "+strconv.Quote(name)+" more than once")
		}
	}
	if len(q) > 1 {
		if a, b := bindsAsOne(q); a != "" {
			return nil, invalid(http.StatusBadRequest, "Bad query", "the query string names "+strconv.Quote(a)+" and "+strconv.Quote(b)+", which a web stack may read as one name")
		}
	}
	return q, nil
}

// queryRoot is the name a query name binds under where a stack parses
// structure into names (qs in Express, Koa and Fastify; PHP; Rails): its
// part before the first "[" once leading "[" and spaces are dropped, case
// folded ("[dry_run]", "dry_run[]" and "dry_run[0]" are all under
// dry_run). sub is false when nothing follows that part but "]" or "[]":
// the name then binds as the root itself (or a list of it), and qs merges
// it with the root's other spellings. Dots are not structure here (qs
// reads them so only with allowDots, which is off by default, and APIs
// such as Solr's take facet beside facet.field); PHP's reading of a dot
// as "_" is phpRoot's.
func queryRoot(name string) (root string, sub bool) {
	n := strings.TrimLeft(name, "[ ")
	part, rest := n, ""
	if i := strings.IndexByte(n, '['); i >= 0 {
		part, rest = n[:i], n[i:]
	}
	return strings.ToLower(strings.TrimRight(part, "]")), rest != "" && rest != "[]"
}

// dottedRoot is a name's root as qs reads it with allowDots, where dots
// are structure too (".dry_run", "dry_run.x"). It is weighed only against
// a tool call's body arguments, which a framework spreading the query over
// the body merges: a plain call's query keeps dotted names apart (Solr's
// facet beside facet.field).
func dottedRoot(name string) string {
	n := strings.TrimLeft(name, "[. ")
	if i := strings.IndexAny(n, "[."); i >= 0 {
		n = n[:i]
	}
	return strings.ToLower(strings.TrimRight(n, "]"))
}

// phpRoot is queryRoot as PHP reads a name: its part before the first "["
// with "." and " " read as "_" ("dry.run[0]" is under dry_run).
func phpRoot(name string) (root string, sub bool) {
	root, sub = queryRoot(name)
	return phpUnderscore.Replace(root), sub
}

// maxQueryParts bounds the "&"-separated parts of a query string.
const maxQueryParts = 100

// bindsAsOne returns two names of q that a web stack may bind to one
// parameter, or "": names that differ only in case (ASP.NET, many Java
// binders), in what PHP rewrites to "_" ("dry.run", "dry run", an
// unclosed "dry[run"), or by a trailing "[]" (PHP, Rails and qs read
// "dry_run[]" as dry_run, a list), and two names under one root
// (queryRoot) of which one binds as the root itself ("dry_run" beside
// "[dry_run]", "dry_run[0]", "dry_run[x]" or "dry_run.x": qs and PHP merge
// them into one list or map). Such a query is a repeated name in
// disguise: the policy would judge one value, the upstream might use the
// other. Structured names alone ("m[1][10]", "filter[name]",
// "filter.kind") keep their structure, which no stack flattens.
func bindsAsOne(q url.Values) (string, string) {
	seen := make(map[string]string, len(q))
	plain := make(map[string]string, len(q)) // root -> a name that binds as it
	var nested map[string]string             // root -> a name with structure under it
	for name := range q {
		k := bindName(name)
		if k == "" {
			continue
		}
		if other, ok := seen[k]; ok {
			return min(name, other), max(name, other)
		}
		seen[k] = name
		root, sub := queryRoot(name)
		php, phpSub := phpRoot(name)
		forms := [3]struct {
			root string
			sub  bool
		}{{root, sub}, {php, phpSub}}
		if !strings.Contains(k, "[") {
			// PHP's reading too: "Dry.Run" is the plain Dry_Run.
			forms[2].root = k
		}
		for _, f := range forms {
			if f.root == "" {
				continue
			}
			other, ok := plain[f.root]
			if !ok && !f.sub {
				other, ok = nested[f.root]
			}
			if ok && other != name {
				return min(name, other), max(name, other)
			}
			if !f.sub {
				plain[f.root] = name
				continue
			}
			if nested == nil {
				nested = make(map[string]string)
			}
			nested[f.root] = name
		}
	}
	return "", ""
}

// bindName is name as bindsAsOne compares it: case folded, leading spaces
// dropped, "." and " " read as "_" and an unclosed "[" too (as PHP reads
// them), and a trailing "[]" dropped.
func bindName(name string) string {
	n := strings.ToLower(strings.TrimLeft(name, " "))
	if i := strings.IndexByte(n, '['); i >= 0 && !strings.Contains(n[i:], "]") {
		n = n[:i] + "_" + n[i+1:]
	}
	n = phpUnderscore.Replace(n)
	return strings.TrimSuffix(n, "[]")
}

// phpUnderscore is what PHP reads as "_" in a query name.
var phpUnderscore = strings.NewReplacer(".", "_", " ", "_")

// querySkeletons are the spellings a query name may bind to where a stack
// parses names, with everything but letters and digits dropped and case
// folded: the whole name (PHP reads "file.path", "file path" and
// "file[path" as file_path), its first part ("file[]", "file[0]",
// "[path]", ".path" and "file.x" bind to file or path in Rails, PHP or
// Express's qs), and its part before "[" ("source.path[0]" is PHP's
// source_path[0]). Target argument names are compared in the same form, so
// a name is refused when any stack could bind it to one; the cost is a
// rare harmless name refused too (file_name against filename).
func querySkeletons(name string) [3]string {
	first := strings.TrimLeft(name, "[. ")
	if i := strings.IndexAny(first, "[."); i >= 0 {
		first = first[:i]
	}
	// PHP binds the part before the first "[" with its dots and spaces
	// read as "_": source.path[0] is source_path[0].
	base := name
	if i := strings.IndexByte(name, '['); i > 0 {
		base = name[:i]
	}
	return [3]string{policy.ArgKey(name), policy.ArgKey(first), policy.ArgKey(base)}
}

// checkToolQuery refuses a tool call's query string (REST, or an MCP
// tools/call) unless its upstream takes one: a tool's arguments are its
// JSON body, and a query the upstream also reads would be arguments the
// policy judged apart from the rest. Where it is taken, a name may not also
// be a body argument.
func checkToolQuery(up *upstream, raw string, query map[string][]string, args map[string]any) *answer {
	if raw == "" {
		return nil
	}
	if !up.ToolQuery {
		return invalid(http.StatusBadRequest, "Query on a tool call", "a tool call's arguments go in its JSON body; this upstream takes no query string (upstreams[].tool_query)")
	}
	return queryAgrees(up, query, args)
}

// queryAgrees refuses a query that names an argument of args, or a target
// argument: checked on the agent's arguments and again on a hook's
// rewrite of them, which the query is sent beside.
func queryAgrees(up *upstream, query map[string][]string, args map[string]any) *answer {
	if len(query) == 0 {
		return nil
	}
	// As loose binders read names (policy.SameArgName): some stacks bind
	// query and body fields to the same struct field regardless of case,
	// and qs merges "dry_run[]", "[dry_run]" or "dry_run.x" into the body's
	// dry_run where a framework spreads the query over the body.
	folded := make(map[string]bool, len(args))
	caseFolded := make(map[string]bool, len(args)) // names without a letter or digit too
	for arg := range args {
		folded[policy.ArgKey(arg)] = true
		caseFolded[foldKey(arg)] = true
	}
	targets := make(map[string]bool, len(up.TargetArgs))
	for _, k := range up.TargetArgs {
		targets[policy.ArgKey(k)] = true
	}
	for name := range query {
		root, _ := queryRoot(name)
		kr, kn, kd := policy.ArgKey(root), policy.ArgKey(name), policy.ArgKey(dottedRoot(name))
		if caseFolded[foldKey(name)] || kr != "" && folded[kr] || kn != "" && folded[kn] || kd != "" && folded[kd] {
			return invalid(http.StatusBadRequest, "Query repeats an argument", strconv.Quote(name)+" is both in the query string and in the body")
		}
		// The policy finds a call's targets in its body only; a target in
		// the query string would be one the rules never saw.
		if sk := querySkeletons(name); targets[sk[0]] || targets[sk[1]] || targets[sk[2]] {
			return invalid(http.StatusBadRequest, "Target in the query string", strconv.Quote(name)+" names a target argument (upstreams[].target_args): send it in the JSON body")
		}
	}
	return nil
}

// isUnreservedEscape reports whether %hl encodes an RFC 3986 unreserved
// character (ALPHA, DIGIT, "-", ".", "_", "~").
func isUnreservedEscape(h, l byte) bool {
	v, ok := unhex(h)
	w, ok2 := unhex(l)
	if !ok || !ok2 {
		return false
	}
	c := v<<4 | w
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// foldKey is s under simple case folding: two names are equal under
// strings.EqualFold exactly when their foldKeys are equal.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		// The smallest rune of r's fold orbit stands for all of it.
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		return low
	}, s)
}
