package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"go.yaml.in/yaml/v3"
)

// servedRule is a row of a rules table served as data (a data file's
// data.toolgate.rules, or the user's Rego): a rules file's row, with the two
// keys rulesData writes, which the library reads when a row has them.
type servedRule struct {
	Rule       `yaml:",inline"`
	ToolGlob   *bool `yaml:"tool_glob"`
	TargetGlob *bool `yaml:"target_glob"`
}

// checkServedTable holds a rules table served as data, as evaluated when
// the policy loads (an array of rows, or an object of them), to a rules
// file's checks: a row with a key the library does not read, a bad
// effect or a malformed glob would otherwise be skipped by the library,
// and a deny row with a typo would let through what it was written to
// stop.
func checkServedTable(table any) error {
	const at = "data.toolgate.rules"
	var rows []any
	switch t := table.(type) {
	case []any:
		rows = t
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			rows = append(rows, t[k])
		}
	default:
		return fmt.Errorf("%s is neither an array nor an object of rows", at)
	}
	rules := make([]Rule, len(rows))
	var errs []error
	for i, row := range rows {
		if _, ok := row.(map[string]any); !ok {
			errs = append(errs, fmt.Errorf("%s[%d] is not an object", at, i))
			continue
		}
		b, err := json.Marshal(row)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", at, i, err))
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		var r servedRule
		if err := dec.Decode(&r); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", at, i, err))
			continue
		}
		rules[i] = r.Rule
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return checkRules(rules, at)
}

var (
	rulesRef      = ast.MustParseRef("data.toolgate.rules")
	rulesIndexRef = ast.MustParseRef("data.toolgate.rules_index")
)

// regoRulesTable names where the user's Rego defines the rules table (a
// rule at data.toolgate.rules or rules_index, or within them), as
// file:line; "" when it does not. Beside policy.rules_file such a table
// would be lost to the file's without a word.
func regoRulesTable(c *ast.Compiler) string {
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) {
		if strings.HasPrefix(name, "lib/") {
			continue // the shipped library (load's key)
		}
		m := c.Modules[name]
		for _, r := range m.Rules {
			p := r.Ref().GroundPrefix()
			for _, table := range []ast.Ref{rulesRef, rulesIndexRef} {
				if p.HasPrefix(table) || table.HasPrefix(p) {
					if r.Location != nil {
						return fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
					}
					return name
				}
			}
		}
	}
	return ""
}
