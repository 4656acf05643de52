package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rule is one row of the rules table (docs/policy.md, the rules table).
// Tool and Target are an exact name, "*" (every call of the tool, with or without a target), or a
// glob ("notes/*" matches one path segment, "src/**" any depth). An exact
// name matches only itself: "notes.txt" does not match "notes.txt.bak".
type Rule struct {
	ID       string `yaml:"id"`
	Effect   string `yaml:"effect"` // allow | deny | ask
	Tool     string `yaml:"tool"`
	Target   string `yaml:"target"`
	ReadOnly bool   `yaml:"read_only"`
	Message  string `yaml:"message"`
	MustAsk  bool   `yaml:"must_ask"`
	// Approvers, on an ask row, names who may approve its calls.
	Approvers *Approvers `yaml:"approvers"`
}

type rulesFile struct {
	Rules []Rule `yaml:"rules"`
}

var ruleID = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)

// ParseRules reads a rules table. Unknown keys, missing fields, bad effects,
// duplicate IDs and malformed globs are errors naming the row.
func ParseRules(src []byte) ([]Rule, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var f rulesFile
	// An empty file is an empty table.
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("rules table: %w", err)
	}
	for i, r := range f.Rules {
		// Targets are matched composed (composed, in target.go).
		f.Rules[i].Target = composed(r.Target)
	}
	if err := checkRules(f.Rules, "rules"); err != nil {
		return nil, err
	}
	return f.Rules, nil
}

// checkRules checks a table's rows, naming each bad one as at[i]: a
// missing or malformed ID, or one used twice, or one of toolgate's own
// (toolgate.*: the library's and the engine's reasons carry them, and a row
// with one would be told apart from them by nothing), a bad effect, a
// missing or malformed tool or target, and keys only an ask row takes.
func checkRules(rules []Rule, at string) error {
	seen := make(map[string]int, len(rules))
	var errs []error
	for i, r := range rules {
		where := fmt.Sprintf("%s[%d]", at, i)
		if r.ID != "" {
			where = fmt.Sprintf("%s[%d] (id %s)", at, i, r.ID)
		}
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, a...)...))
		}
		switch {
		case r.ID == "":
			bad("id is missing")
		case !ruleID.MatchString(r.ID):
			bad("id %q is not a valid id (letters, digits, _ . : -)", r.ID)
		case strings.HasPrefix(r.ID, "toolgate."):
			bad("id %q: ids starting toolgate. are toolgate's own reasons'", r.ID)
		default:
			if j, dup := seen[r.ID]; dup {
				bad("id %q is also used by %s[%d]", r.ID, at, j)
			}
			seen[r.ID] = i
		}
		switch r.Effect {
		case "allow", "deny", "ask":
		default:
			bad("effect %q must be allow, deny or ask", r.Effect)
		}
		if r.Tool == "" {
			bad(`tool is missing (write tool: "*" for every tool)`)
		} else if err := checkPattern(r.Tool); err != nil {
			bad("tool: %v", err)
		}
		if r.Target == "" {
			bad(`target is missing (write target: "*" for every call of the tool)`)
		} else if err := checkPattern(TargetPattern(r.Target), '/'); err != nil {
			bad("target: %v", err)
		}
		if r.MustAsk && r.Effect != "ask" {
			bad("must_ask is only meaningful on an ask rule")
		}
		if r.Approvers != nil {
			if r.Effect != "ask" {
				bad("approvers is only meaningful on an ask rule")
			} else if err := r.Approvers.check(); err != nil {
				bad("%v", err)
			}
		}
	}
	return errors.Join(errs...)
}

// isGlob reports whether p is a pattern rather than an exact name.
func isGlob(p string) bool { return p != "*" && strings.ContainsAny(p, "*?[{") }

// anyDepth finds a run of "**/" at the start of a target glob or after a
// "/": glob.match needs a "/" in the target for every "/" in the glob, so
// "**/.env" would miss the root ".env". As in a .gitignore, such a "**/"
// stands for any number of directories, none included: TargetPattern
// writes it "{**/,}". The library's Rego applies the same expression
// (target_pattern in rego/lib/toolgate.rego), so both engines read a row
// alike.
var anyDepth = regexp.MustCompile(`(^|/)(\*\*/)+`)

// TargetPattern is the pattern a target glob is matched with: p with each
// leading "**/" made to match no directory as well as some.
func TargetPattern(p string) string { return anyDepth.ReplaceAllString(p, "${1}{**/,}") }

// checkPattern refuses a glob that glob.match or its regular expression
// (globre.go) would fail on, so a broken table is refused at load, not at
// the first call. An exact name needs no check.
func checkPattern(p string, sep ...rune) error {
	if err := checkGlob(p); err != nil || !isGlob(p) {
		return err
	}
	_, err := compileGlob(p, sep...)
	return err
}

// checkGlob rejects patterns OPA's glob.match would fail on at evaluation
// time, so a broken table is refused at load, not at the first call.
func checkGlob(p string) error {
	depth := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
			if i >= len(p) {
				return fmt.Errorf("%q ends with a lone backslash", p)
			}
		case '[':
			j := strings.IndexByte(p[i+1:], ']')
			if j < 0 {
				return fmt.Errorf("%q has an unclosed [", p)
			}
			if strings.HasPrefix(p[i+1:], "^") {
				// A regular expression's negation is a literal "^" to
				// a glob: a deny row "secrets/[^.]*" would cover the
				// opposite of what it reads as.
				return fmt.Errorf("%q starts a [...] with ^, which a glob reads as the character ^, not as \"not\": write [!...] to negate, or put the ^ after the first character", p)
			}
			i += j + 1
		case '{':
			depth++
		case '}':
			depth--
			if depth < 0 {
				return fmt.Errorf("%q has an unmatched }", p)
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("%q has an unclosed {", p)
	}
	return nil
}

// rulesData is the table as Rego sees it at data.toolgate.rules, and the
// index the library matches through: rows by exact tool name ("by_tool") and
// rows whose tool is "*" or a glob ("wild"), and the regular expression of
// each glob that backtracks, by pattern ("tool_regex", "target_regex";
// globre.go). Each row also says whether its tool and target are globs,
// so the library scans no strings per call.
func rulesData(rules []Rule) (table []any, index map[string]any) {
	table = make([]any, 0, len(rules))
	byTool := map[string]any{}
	wild := []any{}
	toolRegex, targetRegex := map[string]any{}, map[string]any{}
	for _, r := range rules {
		// ParseRules compiled them; one that did not compile is left
		// to glob.match, which refuses it in turn.
		if isGlob(r.Tool) && backtracks(r.Tool) {
			if re, err := globRegexp(r.Tool); err == nil {
				toolRegex[r.Tool] = re
			}
		}
		if p := TargetPattern(r.Target); isGlob(r.Target) && backtracks(p) {
			if re, err := globRegexp(p, '/'); err == nil {
				targetRegex[r.Target] = re
			}
		}
		row := map[string]any{
			"id":          r.ID,
			"effect":      r.Effect,
			"tool":        r.Tool,
			"target":      r.Target,
			"tool_glob":   isGlob(r.Tool),
			"target_glob": isGlob(r.Target),
			"read_only":   r.ReadOnly,
			"must_ask":    r.MustAsk,
		}
		if r.Message != "" {
			row["message"] = r.Message
		}
		if r.Approvers != nil {
			row["approvers"] = r.Approvers.rulesData()
		}
		table = append(table, row)
		if r.Tool == "*" || isGlob(r.Tool) {
			wild = append(wild, row)
			continue
		}
		rows, _ := byTool[r.Tool].([]any)
		byTool[r.Tool] = append(rows, row)
	}
	return table, map[string]any{"by_tool": byTool, "wild": wild, "tool_regex": toolRegex, "target_regex": targetRegex}
}
