package policy

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// DefaultTargetArgs are the argument names searched for a call's target, in
// order, when an upstream does not name its own.
var DefaultTargetArgs = []string{"path", "file_path", "file", "filename", "target", "url", "uri", "command"}

// NewTool is NewToolWith without folding: a Tool whose target is the first
// string argument named in targetArgs, normalised by NormalizeTarget.
func NewTool(name string, args map[string]any, targetArgs []string) *Tool {
	return NewToolWith(name, args, targetArgs, FoldNone)
}

// NewToolWith builds a Tool whose target is the first string argument named
// in targetArgs, folded as fold says, for an upstream that resolves names
// its own way (target_fold). For the MCP
// pseudo-tools (ToolResourcesRead, ToolPromptsGet) the target comes from
// their own argument whatever targetArgs says, as MCPTool builds them, so
// rebuilding a parked call's tool from its name and arguments gives the
// same tool.
func NewToolWith(name string, args map[string]any, targetArgs []string, fold Fold) *Tool {
	switch name {
	case ToolResourcesRead:
		targetArgs = []string{"uri"}
	case ToolPromptsGet:
		t := &Tool{Name: name, Arguments: args}
		if s, ok := args["name"].(string); ok {
			// A prompt's name is a name, not a path: used as sent.
			t.HasTarget, t.Target, t.TargetRaw = true, s, s
			t.Targets = []TargetArg{{Arg: "name", Target: s, Raw: s}}
		}
		return t
	case ToolCompletePrompt, ToolCompleteResource:
		return completionTarget(name, args, fold)
	}
	return newTool(name, args, targetArgs, fold)
}

// completionTarget is the completion call name (ToolCompletePrompt or
// ToolCompleteResource) whose arguments are args: its target is what
// params.ref names, as prompts/get's name (as sent) or resources/read's
// uri (normalised) would be, listed as the argument "ref.name" or
// "ref.uri". A ref that is not the kind name completes has no target.
func completionTarget(name string, args map[string]any, fold Fold) *Tool {
	key, target, ok := completionRef(args)
	if !ok || (key == "name") != (name == ToolCompletePrompt) {
		return &Tool{Name: name, Arguments: args}
	}
	var t *Tool
	if key == "name" {
		t = NewToolWith(ToolPromptsGet, map[string]any{"name": target}, nil, fold)
	} else {
		t = NewToolWith(ToolResourcesRead, map[string]any{"uri": target}, nil, fold)
	}
	t.Name, t.Arguments = name, args
	for i := range t.Targets {
		t.Targets[i].Arg = "ref." + t.Targets[i].Arg
	}
	return t
}

// newTool collects every argument named in targetArgs, in that order. The
// first string is the call's target (tool.target); all of them are its
// targets (tool.targets), because a tool may act on an argument other than
// the first one named: a call of a tool that reads "file" can carry a
// decoy "path", and the rules table must see "file" too. An array gives
// each of its strings; any other value (an object, a number, a string
// inside an object) is an opaque target, one the policy cannot read and so
// must assume could be anything. A null names nothing.
func newTool(name string, args map[string]any, targetArgs []string, fold Fold) *Tool {
	t := &Tool{Name: name, Arguments: args}
	readable := 0 // bytes of the readable targets so far
	add := func(a TargetArg) {
		if !a.Opaque {
			if n := len(a.Target) + len(a.Relative); readable+n > maxTargetsLen {
				a = tooLong(a)
			} else {
				readable += n
			}
		}
		if len(t.Targets) < MaxTargetEntries {
			t.Targets = append(t.Targets, a)
			return
		}
		// MaxTargetEntries reached: one opaque target stands for the rest, and
		// escapes when any of them does.
		if len(t.Targets) == MaxTargetEntries {
			t.Targets = append(t.Targets, TargetArg{Arg: a.Arg, Opaque: true})
		}
		if rest := &t.Targets[MaxTargetEntries]; a.Escapes && !rest.Escapes {
			rest.Raw, rest.Escapes = a.Raw, true
		}
	}
	stringTarget := func(k, s string) TargetArg {
		if jsonText(s) {
			// A tool may read a string that holds JSON as that JSON
			// (FastMCP parses a string argument whose parameter is not a
			// str, and takes a list or an object): "[\"secrets/key\"]" would
			// be the list of secrets/key. No row can name what it holds.
			return TargetArg{Arg: k, Raw: s, Opaque: true}
		}
		norm, rel, escapes, unreadable := normalizeTarget(k, s, fold)
		if unreadable {
			// A URL whose host clients read in more than one way, or
			// not at all as toolgate can: no row can name it, so deny
			// and ask rows count it as matching, allow rows as not.
			return TargetArg{Arg: k, Raw: s, Escapes: escapes, Opaque: true}
		}
		if len(norm) > MaxTargetLen {
			return tooLong(TargetArg{Arg: k, Raw: s, Escapes: escapes})
		}
		return TargetArg{Arg: k, Target: norm, Relative: rel, Raw: s, Escapes: escapes}
	}
	// A path holding percent-escapes is also its decoded spelling, the
	// path a tool that decodes its argument opens: "%73ecrets/key" is
	// secrets/key to it, and a deny row for secrets/** must see that.
	//
	// A value of a path argument that parses as a URL ("a://b/../../secrets/key")
	// is also its path reading: a tool that joins it to its root opens
	// secrets/key, and the URL's target (a://b/secrets/key) is not that.
	addPathReading := func(k, s, raw string) {
		// A scheme needs a ':'; without one, asURL (which stringTarget
		// ran already) is not asked again on every path.
		if !urlArg(k) && !commandArg(k) && strings.IndexByte(s, ':') > 0 {
			if _, _, isURL, _ := asURL(k, s); isURL {
				p, rel, escapes := normalizePath(s, fold)
				add(TargetArg{Arg: k, Target: p, Relative: rel, Raw: raw, Escapes: escapes})
			}
		}
	}
	addDecoded := func(k, s string) {
		addPathReading(k, s, s)
		if d, ok := decodedTarget(k, s, fold); ok {
			add(d)
			// A tool that decodes and then trims ("%20secrets/key")
			// reads the decoded spelling trimmed.
			if dec, _, _ := decodePercent(s, fold); !d.Opaque {
				if t := strings.TrimFunc(dec, trimmedByTools); t != dec && t != "" {
					a := stringTarget(k, t)
					a.Raw = s
					add(a)
					addPathReading(k, t, s)
				}
			}
		}
		if f, ok := bestFitLetters(k, s, fold); ok {
			add(f)
		}
	}
	// A tool may trim its argument (Python's strip(), JavaScript's trim(),
	// a validator's whitespace stripping): " secrets/key" is secrets/key
	// to it, and a deny row for secrets/** must see that. sent is the
	// entry of s as sent: a URL is read trimmed already, as URL parsers
	// read it, and is not given again; its path reading is ("a://b/../x "
	// is x to a tool that trims and joins the URL's path to its root).
	addTrimmed := func(k, s string, sent TargetArg) {
		trimmed := strings.TrimFunc(s, trimmedByTools)
		if trimmed == s || trimmed == "" || commandArg(k) {
			return
		}
		n := len(t.Targets)
		if a := stringTarget(k, trimmed); a.Target != sent.Target || a.Relative != sent.Relative || a.Opaque != sent.Opaque {
			add(a)
		}
		addDecoded(k, trimmed)
		for i := n; i < min(len(t.Targets), MaxTargetEntries); i++ {
			t.Targets[i].Raw = s // the value as sent
		}
	}
	var scratch targetScratch
	for i, v := range scratch.values(args, targetArgs) {
		k := targetArgs[i]
		switch v := v.(type) {
		case nil:
		case string:
			a := stringTarget(k, v)
			if !t.HasTarget {
				t.HasTarget = true
				t.Target, t.TargetRaw, t.TargetEscapes = a.Target, v, a.Escapes
				if a.Opaque {
					t.Target = v // unreadable: as sent
				}
			}
			add(a)
			addDecoded(k, v)
			addTrimmed(k, v, a)
		case []any:
			for _, e := range v {
				switch e := e.(type) {
				case nil:
				case string:
					a := stringTarget(k, e)
					add(a)
					addDecoded(k, e)
					addTrimmed(k, e, a)
				default:
					add(opaqueTarget(k, e, fold))
				}
			}
		default:
			add(opaqueTarget(k, v, fold))
		}
	}
	return t
}

// trimmedByTools reports the characters string trimming drops at either
// end: Go's, Python's and JavaScript's white space (Python's also takes
// C0 separators, which a target cannot hold), and JavaScript's U+FEFF.
func trimmedByTools(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// MaxTargets bounds tool.targets: a body of one large array would
// otherwise make as many targets, each normalised, matched and logged.
// The proxy refuses a call with more (CheckTargets); a Tool built from
// more anyway (a call parked before that check) lists MaxTargets and one
// opaque target for the rest, so deny and ask rows still fire, no allow
// row but "*" covers it, and an escaping one among the rest is denied.
const MaxTargets = 256

// MaxTargetLen bounds a target the rules table matches, in bytes. A glob
// with two "**" and a literal between them ("**/.ssh/**/id_*") takes time
// quadratic in the target's length, in Go as in OPA's glob.match, which
// an evaluation's timeout does not interrupt: a 1 MiB target held a core
// for seconds. A longer target is opaque (deny and ask rows fire on it,
// allow rows other than "*" do not); no file path needs more (4096 is
// Linux's PATH_MAX), and a URL that long is rare enough to be asked about.
const MaxTargetLen = 4096

// maxTargetsLen bounds the bytes of all a call's readable targets (their
// spellings and relative spellings): past it, the rest are opaque. With
// MaxTargetLen it bounds what one call's matching can cost to some
// sixteen targets of the longest kind per row.
const maxTargetsLen = 64 << 10

// tooLong is a as an opaque target: too long for the table to match.
func tooLong(a TargetArg) TargetArg {
	return TargetArg{Arg: a.Arg, Raw: a.Raw, Escapes: a.Escapes, Opaque: true}
}

// MaxTargetEntries bounds tool.targets' entries: a value may give six (as
// sent, its path reading when it looks like a URL, its decoded spelling and
// that trimmed with its path reading, its best-fit spelling with
// FoldWindows), and six more for its trimmed spelling.
const MaxTargetEntries = 12 * MaxTargets

// opaqueTarget is the target of argument k holding v, a value the policy
// cannot read as one path. It escapes when any string inside v (a value
// or an object's key), read as a value of k, climbs above its root: a
// tool that joins an array of path parts, or reads a field of an object,
// may act on that string, and the library's escape denial must not
// depend on a row naming a target.
func opaqueTarget(k string, v any, fold Fold) TargetArg {
	a := TargetArg{Arg: k, Opaque: true}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			if _, escapes := NormalizeTargetFold(k, v, fold); escapes {
				a.Raw, a.Escapes = v, true
				return true
			}
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			// In key order, so that the same call names the same string.
			// Keys too: a tool taking {path: content} writes to its keys.
			for _, key := range slices.Sorted(maps.Keys(v)) {
				if walk(key) || walk(v[key]) {
					return true
				}
			}
		}
		return false
	}
	walk(v)
	return a
}

// TargetArg is one target of a call: a string argument named in
// target_args, or a string in such an argument's array.
type TargetArg struct {
	Arg    string `json:"arg"`              // the argument's name as target_args spells it
	Target string `json:"target,omitempty"` // normalised as tool.target is
	// Relative is a rooted target without its leading slashes
	// ("/secrets/key": "secrets/key"); deny and ask rows match it too.
	Relative string `json:"relative,omitempty"`
	Raw      string `json:"raw,omitempty"` // as sent
	Escapes  bool   `json:"escapes,omitempty"`
	// Opaque: the argument holds something other than strings (an object,
	// a number), so it has no target the policy can read; rules-table deny
	// and ask rows count it as matching, allow rows as not. Escapes and Raw
	// then tell of a string inside it that climbs above its root.
	Opaque bool `json:"opaque,omitempty"`
}

// AllTargets is the call's targets: Targets, or for a Tool built by hand
// with only Target set, that one. Empty when the call has no target.
func (t *Tool) AllTargets() []TargetArg {
	switch {
	case t.Targets != nil:
		return t.Targets
	case t.HasTarget:
		return []TargetArg{{Target: t.Target, Raw: t.TargetRaw, Escapes: t.TargetEscapes}}
	}
	return nil
}

// hasTargets reports whether the input shows tool.targets.
func (t *Tool) hasTargets() bool { return t.Targets != nil || t.HasTarget }

// SoleTarget reports whether every target of the call is target: a grant
// for one target may stand in only for calls that act on nothing else. A
// value sent decomposed is read as its composed spelling (composed), but
// on Linux's and Windows' file systems it names another file than that
// one: a grant does not stand in for it, as for other values with more
// than one reading. A call without a target (or with an empty one) acts
// on no named target: no grant for a target stands in for it, whatever
// its arguments.
func (t *Tool) SoleTarget(target string) bool {
	all := t.AllTargets()
	if target == "" {
		return false
	}
	for _, a := range all {
		if a.Opaque || a.Target != target || a.Raw != composed(a.Raw) || otherReadings(a.Arg, a.Raw) {
			return false
		}
	}
	return len(all) > 0
}

// otherReadings reports whether raw, the value of argument arg, has
// spellings that normalising makes one but a tool or a server may not. A
// URL (as asURL reads the value: spaces around it dropped) has one when
// its scheme is not followed by a slash ("https:h", "file:etc/p": WHATWG
// adds the slashes, other parsers do not), when it holds user information
// (other credentials), an escape in its authority ("u%40h"), a host with
// a trailing dot, also written "。" (another Host and SNI), and in its path
// (before its query) a dot segment, an empty segment ("//"), a backslash,
// or an escaped delimiter, dot, percent or backslash ("%2e", "%2F", "%3B":
// RFC 3986 2.2, a segment or a parameter of its own to a server). A file
// path has one with a backslash (a file of that name on Linux, a UNC path
// on Windows) or a ".." segment (through a symbolic link it is elsewhere).
// A command is passed through as written: it has one spelling.
func otherReadings(arg, raw string) bool {
	if commandArg(arg) {
		return false
	}
	trimmed := strings.Trim(raw, " ")
	if _, _, isURL, _ := asURL(arg, composed(trimmed)); !isURL {
		if strings.ContainsRune(raw, '\\') {
			return true
		}
		for seg := range strings.FieldsFuncSeq(raw, func(r rune) bool { return r == '/' }) {
			if seg == ".." {
				return true
			}
		}
		return false
	}
	i := schemeEnd(trimmed)
	if i == 0 || i == len(trimmed) || trimmed[i] != '/' && trimmed[i] != '\\' {
		return true // no scheme, or no slash after it: read two ways
	}
	rest := strings.TrimLeft(trimmed[i:], `/\`)
	if j := strings.IndexAny(rest, "?#"); j >= 0 {
		rest = rest[:j]
	}
	auth, urlPath, _ := strings.Cut(rest, "/")
	if k := strings.IndexByte(auth, '\\'); k >= 0 {
		auth, urlPath = auth[:k], auth[k:]+"/"+urlPath
	}
	host := fullStops.Replace(auth)
	if k := strings.LastIndexByte(host, ':'); k >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:k]
	}
	if strings.ContainsAny(auth, "@%") || strings.HasSuffix(host, ".") || strings.ContainsRune(urlPath, '\\') ||
		strings.Contains(urlPath, "//") || escapesDelimiter(urlPath) {
		return true
	}
	for seg := range strings.SplitSeq(urlPath, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// fullStops are the full stops of other scripts that IDNA reads as ".".
var fullStops = strings.NewReplacer("。", ".", "．", ".", "｡", ".")

// escapesDelimiter reports whether p holds a percent-escape of a reserved
// character (RFC 3986 2.2), a dot, a percent sign or a backslash: an
// escape a server may read otherwise than the character it decodes to.
func escapesDelimiter(p string) bool {
	for i := 0; i+2 < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		h, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err == nil && strings.IndexByte(":/?#[]@!$&'()*+,;=.%\\", byte(h)) >= 0 {
			return true
		}
	}
	return false
}

// urlArg and commandArg report whether a target argument, named in
// target_args in any case, is a URL's or a command's: it is looked up in
// the arguments in any case (targetValues), so "URI" in target_args reads a
// uri argument, which must still be read as a URL.
func urlArg(arg string) bool     { return strings.EqualFold(arg, "url") || strings.EqualFold(arg, "uri") }
func commandArg(arg string) bool { return strings.EqualFold(arg, "command") }

// targetValues appends to vals the value of each argument named in
// targetArgs, vals[i] for targetArgs[i] (nil when there is none), matching
// names the way loose binders match a parameter (SameArgName): a tool
// written in Go reads {"PATH": …} as its path argument, one with
// encoding/json/v2's case:ignore or pydantic's camel-case aliases
// {"filePath": …} as its file_path, so the policy must see it as a target
// too. A name sent as written wins; arguments two of which name one
// parameter never get here (CheckArgNames refuses them). args is walked
// once, whatever the number of names; found is scratch space, as vals is,
// which callers give from their stack (targetScratch).
func targetValues(args map[string]any, targetArgs []string, vals []any, found []bool) []any {
	missing := 0
	for _, k := range targetArgs {
		v, ok := args[k]
		vals, found = append(vals, v), append(found, ok)
		if !ok {
			missing++
		}
	}
	if missing == 0 {
		return vals
	}
	for name, v := range args {
		for i, k := range targetArgs {
			if !found[i] && SameArgName(name, k) {
				vals[i], found[i] = v, true
				if missing--; missing == 0 {
					return vals
				}
			}
		}
	}
	return vals
}

// targetScratch is room on a caller's stack for targetValues: as many
// target_args as a configuration usually has.
type targetScratch struct {
	vals  [16]any
	found [16]bool
}

// values is targetValues with s's room.
func (s *targetScratch) values(args map[string]any, targetArgs []string) []any {
	return targetValues(args, targetArgs, s.vals[:0], s.found[:0])
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
	return NormalizeTargetFold(arg, raw, FoldNone)
}

// Fold is how an upstream resolves the names in its targets, beyond what
// NormalizeTarget does for every upstream.
type Fold uint8

const (
	// FoldNone: names are compared as written (target_fold: none).
	FoldNone Fold = iota
	// FoldWindows: names resolve as on Windows (target_fold: windows):
	// case-insensitively, and with each segment's trailing dots and spaces
	// ignored, so "NOTES\Today.TXT. " names notes/today.txt.
	FoldWindows
)

// ParseFold reads a target_fold setting: "" or "none", or "windows".
func ParseFold(s string) (Fold, error) {
	switch s {
	case "", "none":
		return FoldNone, nil
	case "windows":
		return FoldWindows, nil
	}
	return FoldNone, fmt.Errorf("target_fold %q: want none or windows", s)
}

// NormalizeTargetFold is NormalizeTarget for an upstream that folds names.
// With FoldWindows a file path is case-folded and each segment loses its
// trailing dots and spaces before it is cleaned; a segment of nothing but
// dots and spaces other than "." and ".." (which Windows may read as the
// directory itself or as its parent) makes the target count as escaping,
// so that the shipped library denies it. URLs and commands are not folded.
func NormalizeTargetFold(arg, raw string, fold Fold) (target string, escapes bool) {
	target, _, escapes, unreadable := normalizeTarget(arg, raw, fold)
	if unreadable {
		return raw, escapes
	}
	return target, escapes
}

// normalizeTarget is NormalizeTargetFold with a rooted path's relative
// spelling: "/secrets/key" is also "secrets/key", since many tools join
// even a rooted path to their root (Go's filepath.Join, Node's path.join,
// the example notes server), and a deny row written "secrets/**" must see
// it. relative is "" for a path that is not rooted. A rooted path escapes
// when its relative spelling does ("/../x" is "../x" under a root). For a
// URL, relative is its spelling without the "/" asURL puts before a query
// (see there), which deny and ask rows written before it must still see.
// unreadable reports a URL no row can name (asURL): the target is then
// opaque.
func normalizeTarget(arg, raw string, fold Fold) (target, relative string, escapes, unreadable bool) {
	if raw == "" || commandArg(arg) {
		return raw, "", false, false
	}
	if u, written, isURL, readable := asURL(arg, composed(raw)); isURL {
		// A value of a path argument that parses as a URL
		// ("x://../../etc/passwd": host "..") is still a path to a tool
		// that joins it to its root: it escapes when, cleaned as a path,
		// it climbs above that root.
		if !urlArg(arg) {
			p := path.Clean(strings.ReplaceAll(raw, `\`, "/"))
			escapes = climbs(p)
		}
		escapes = escapes || fileURLMisread(raw)
		return u, written, escapes, !readable
	}
	target, relative, escapes = normalizePath(raw, fold)
	return target, relative, escapes, false
}

// fileURLMisread reports a file: URL that a tool turning it into a path
// by string handling may read above the directory its target names: a
// ".." segment in its query or fragment ("file:///docs/a#/../../etc/passwd"
// is /etc/passwd once its text is cleaned as a path, while the URL's own
// path is /docs/a), or a percent-encoded '%', which a second decoding
// makes another character ("%252e%252e" is ".."). A URL's own path is
// cleaned as a URL's (asURL); a file: URL rarely holds either.
//
// A resource URI of another scheme than the web's (http, https, ws, wss)
// is read alike for its query and fragment: an MCP server's template
// ("notes:///docs/view{?file}") hands the variable to code that joins it
// to a root, so "?file=../secrets/key" climbs.
func fileURLMisread(raw string) bool {
	s := strings.TrimLeft(raw, " ")
	scheme, rest, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return false
	case strings.EqualFold(scheme, "file"):
		s = strings.ReplaceAll(rest, `\`, "/")
		if strings.Contains(strings.ToLower(s), "%25") {
			return true
		}
	case webScheme(scheme):
		return false
	default:
		s = strings.ReplaceAll(rest, `\`, "/")
	}
	i := strings.IndexAny(s, "?#")
	if i < 0 {
		return false
	}
	// Read once decoded too: a tool that decodes the URL's text reads
	// "%2e%2e" there as "..".
	tail := s[i+1:]
	if d, err := url.PathUnescape(tail); err == nil {
		tail += "/" + strings.ReplaceAll(d, `\`, "/")
	}
	// A template's variable is a query value ("file=.."), or a segment of
	// one ("file=../secrets").
	for _, seg := range strings.FieldsFunc(tail, func(r rune) bool { return r == '/' || r == '=' || r == '&' || r == ';' }) {
		if strings.Trim(seg, "?#") == ".." {
			return true
		}
	}
	return false
}

// webScheme reports the schemes whose query is the application's data, not
// a path a tool joins to its root.
func webScheme(scheme string) bool {
	for _, w := range []string{"http", "https", "ws", "wss"} {
		if strings.EqualFold(scheme, w) {
			return true
		}
	}
	return false
}

// normalizePath is raw read as a file path (normalizeTarget's, for a value
// that is not a URL): slashes for backslashes, cleaned, folded as fold
// says, escaping when it climbs above its root or a tool may read it as
// other path syntax (misread).
func normalizePath(raw string, fold Fold) (target, relative string, escapes bool) {
	p := strings.ReplaceAll(composed(raw), `\`, "/")
	// A spelling a tool may read as other path syntax than toolgate does
	// (misread) is refused before any policy runs (CheckTargetSpelling);
	// here it escapes, so that a target built without that check (a call
	// parked before it) is denied all the same.
	_, ambiguous := misread(raw, fold)
	if fold == FoldWindows {
		var trailing bool
		p, trailing = foldWindows(p)
		ambiguous = ambiguous || trailing
		if drive(p) && len(p) > 2 && p[2] == '/' {
			// "c:/../secrets" is c:/secrets: no ".." climbs above a
			// drive's root, and path.Clean would take "c:" for a directory.
			return p[:2] + path.Clean(p[2:]), "", ambiguous
		}
	}
	if strings.HasPrefix(p, "/") {
		relative = path.Clean(strings.TrimLeft(p, "/"))
	}
	p = path.Clean(p)
	escapes = ambiguous || climbs(p) || climbs(relative)
	return p, relative, escapes
}

// composed is s in Unicode NFC. A name spelt decomposed ("a" and U+0308
// for "ä") is the same text as its composed spelling, and the same file on
// macOS (whose file systems look names up in either form) and to any tool
// that normalises its input: a row, which editors write composed (and
// ParseRules composes), must see it so. Approvers are shown both alike.
func composed(s string) string {
	if isASCII(s) {
		return s
	}
	return norm.NFC.String(s)
}

// drive reports whether p starts with a (folded) drive letter and colon.
func drive(p string) bool { return len(p) >= 2 && p[1] == ':' && 'a' <= p[0] && p[0] <= 'z' }

// climbs reports whether a cleaned relative path climbs above its root.
func climbs(p string) bool { return p == ".." || strings.HasPrefix(p, "../") }

// foldWindows folds a slash-separated path as Windows resolves it. Case is
// folded through upper case and back (unicode.ToLower(unicode.ToUpper(r))),
// so that every pair of runes Windows' upper-case comparison identifies
// ("ſ" and "s", "ı" and "i") folds alike. ambiguous reports a segment that
// was only dots and spaces but not "." or "..", a drive-relative path, or a
// UNC or device path.
func foldWindows(p string) (folded string, ambiguous bool) {
	p = strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, p)
	segs := strings.Split(p, "/")
	// A drive-relative path ("C:..\x", "C:secrets\x", "C:": from the
	// drive's current directory, which a tool may join to its root) and a
	// UNC or device path ("\\server\share", "\\?\C:\", "\??\C:\") are
	// ambiguous too.
	if drive(segs[0]) && (len(segs[0]) > 2 || len(segs) == 1) || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/??/") {
		ambiguous = true
	}
	for i, seg := range segs {
		if seg == "." || seg == ".." {
			continue
		}
		trimmed := strings.TrimRight(seg, ". ")
		if trimmed == "" && seg != "" {
			ambiguous = true
		}
		segs[i] = trimmed
	}
	return strings.Join(segs, "/"), ambiguous
}

// asURL normalises raw as a URL when it is one (isURL: an argument named
// url or uri, or a value with a scheme and "://", or a special scheme and
// a slash); written is its spelling before a "/" was put ahead of its
// query, or "" when none was. readable is false for a URL whose host
// cannot be read as every client reads it (readableAuthority,
// canonicalAuthority) or that does not parse.
func asURL(arg, raw string) (target, written string, isURL, readable bool) {
	urlArg := urlArg(arg)
	// Backslashes are slashes to a WHATWG URL parser (browsers, Node's
	// fetch): "https://evil.com\.example.com/x" goes to evil.com. So are
	// any number of them after a special scheme ("https:/evil.com"), and
	// spaces around a URL are dropped.
	trimmed := strings.Trim(raw, " ")
	s := fileURL(specialSlashes(strings.ReplaceAll(trimmed, `\`, "/"), urlArg))
	if i := strings.Index(s, "://"); i <= 0 && !urlArg {
		return "", "", false, false
	}
	if urlArg && strings.HasPrefix(s, "//") {
		// A network-path reference ("//169.254.169.254/x", `\\host\x`):
		// urljoin, new URL(u, base) and ResolveReference reach its host,
		// under the base's scheme, which no row can name.
		return "", "", true, false
	}
	if !readableAuthority(trimmed) {
		return "", "", true, false
	}
	// The host as it is reached (urlhost.go); deny and ask rows also see
	// an internationalised host in Unicode.
	s, unicodeHost, ok := canonicalAuthority(s)
	if !ok {
		return "", "", true, false
	}
	// Once the host is read as a lookup reads it ("%6cocalhost",
	// fullwidth letters, a soft hyphen): localhost is no host to a WHATWG
	// parser, which reads file://%6cocalhost/p as file:///p.
	s = fileURL(s)
	u, err := url.Parse(escapeStrayPercents(s))
	switch {
	case err != nil && strings.Contains(s, "://"):
		return "", "", true, false
	case err != nil || u.Scheme == "" || u.Opaque != "":
		// A url argument without a scheme ("docs/a.md") or without
		// "//" ("urn:isbn:…") is read as a path.
		return "", "", false, false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.User = nil
	if u.Path != "" {
		// A backslash in the decoded path (written %5C) is a separator to a
		// Windows server and to many a URL-decoding one:
		// "file:///C:/docs/%5C..%5Csecrets" opens C:/secrets.
		u.Path = strings.ReplaceAll(u.Path, `\`, "/")
		trailing := strings.HasSuffix(u.Path, "/")
		if d, ok := fileDrive(u, s); ok {
			// A WHATWG parser never takes a file: URL's drive letter away
			// with "..": file:///C:/../docs/x is file:///C:/docs/x
			// ("C|" is read as "C:").
			u.Path = d + path.Clean("/"+u.Path[3:])
		} else {
			u.Path = path.Clean("/" + u.Path)
		}
		if trailing && u.Path != "/" && !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		u.RawPath = ""
	} else if u.Host != "" {
		// An empty path is the root: "https://evil.com" is
		// "https://evil.com/" to a browser, so a row for every path of a
		// host (https://evil.com*/**) covers it. And
		// "https://evil.com?.example.com/x" is evil.com: a "/" before the
		// query keeps a glob's host segment (https://*.example.com/**)
		// from reading the query as part of the host. The spelling
		// without it is kept for deny and ask rows ("https://x.com*").
		written = u.String()
		u.Path = "/"
	}
	if unicodeHost != "" {
		// Written by hand: url.URL.String would percent-encode it.
		if written == "" {
			written = u.String()
		}
		written = strings.Replace(written, "://"+u.Hostname(), "://"+unicodeHost, 1)
	}
	return u.String(), written, true, true
}

// jsonText reports whether s reads as a JSON array or object to a parser
// that skips JSON's whitespace first. Python's json.loads also takes NaN
// and Infinity inside, which no Go validator does, so the first character
// decides.
func jsonText(s string) bool {
	s = strings.TrimLeft(s, " \t\n\r")
	return s != "" && (s[0] == '[' || s[0] == '{')
}

// fileDrive returns the drive ("/C:") a file: URL's path starts with, as
// WHATWG's parser reads a Windows drive letter: a letter and ":" or "|"
// as written in raw (an escaped "%3A" is no drive), then "/" or the end.
func fileDrive(u *url.URL, raw string) (string, bool) {
	p := u.Path
	if u.Scheme != "file" || len(p) < 3 || p[0] != '/' || !(p[2] == ':' || p[2] == '|') ||
		!('a' <= p[1]|0x20 && p[1]|0x20 <= 'z') || len(p) > 3 && p[3] != '/' {
		return "", false
	}
	// As written: "file:///C:/…" (after the empty host), not "file:///C%3A/…".
	if len(raw) < 10 || !strings.EqualFold(raw[:8], "file:///") || raw[9] != ':' && raw[9] != '|' {
		return "", false
	}
	return "/" + p[1:2] + ":", true
}
