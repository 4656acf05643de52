package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/logurl"
)

// urlKeys hold URLs that may carry a credential in their user information
// (https://user:pass@host) or query (?token=); Redacted prints them as
// logs do (logurl), with REDACTED in place of either.
var urlKeys = map[string]bool{
	"public_url":                true,
	"proxy_public_url":          true,
	"upstreams[].url":           true,
	"identity.jwt.jwks_url":     true,
	"log.decisions.service.url": true,
	"hooks[].url":               true,
}

// notifyURLKey holds webhook URLs. Slack, Teams and most webhook receivers
// put the credential in the path or query, so Redacted shows only the
// scheme and host.
const notifyURLKey = "approvals.notify[].url"

// Redacted returns the configuration as YAML, every key in file order and
// with the file's key names, so it reads like a complete configuration file.
// Every Secret that is set prints as "[redacted]" (an empty one as ""),
// URLs' user information and queries as REDACTED, and approvals.notify URLs as
// scheme://host/[redacted] when they have a path or query.
func (c *Config) Redacted() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(mappingNode(schema(), reflect.ValueOf(c).Elem())); err != nil {
		return nil, fmt.Errorf("config: encoding: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encoding: %w", err)
	}
	return buf.Bytes(), nil
}

// mappingNode encodes struct v, described by n.
func mappingNode(n *node, v reflect.Value) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, f := range n.fields {
		out.Content = append(out.Content, stringNode(f.key), valueNode(f, v.Field(f.index)))
	}
	return out
}

// valueNode encodes the value v of key n.
func valueNode(n *node, v reflect.Value) *yaml.Node {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
		}
		v = v.Elem()
	}
	switch {
	case n.list:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v.Len() == 0 {
			seq.Style = yaml.FlowStyle // []
		}
		for i := range v.Len() {
			seq.Content = append(seq.Content, mappingNode(n, v.Index(i)))
		}
		return seq
	case n.leaf == notLeaf:
		return mappingNode(n, v)
	case n.leaf == leafSecret:
		return stringNode(Secret(v.String()).String())
	case n.leaf == leafBool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	case n.leaf == leafDuration:
		return stringNode(Duration(v.Int()).String())
	case n.leaf == leafByteSize:
		return stringNode(ByteSize(v.Int()).String())
	case n.leaf == leafInt:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	case n.leaf == leafMap:
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if v.Len() == 0 {
			m.Style = yaml.FlowStyle // {}
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			m.Content = append(m.Content, stringNode(k.String()), stringNode(v.MapIndex(k).String()))
		}
		return m
	case n.leaf == leafStrings:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for i := range v.Len() {
			s := v.Index(i).String()
			if v.Type().Elem() == secretType { // a list of secrets (approvals.previous_secrets)
				s = Secret(s).String()
			}
			seq.Content = append(seq.Content, stringNode(s))
		}
		return seq
	}
	s := v.String()
	switch {
	case urlKeys[n.path]:
		s = redactURL(s, false)
	case n.path == notifyURLKey:
		s = redactURL(s, true)
	}
	return stringNode(s)
}

func stringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// redactURL hides the user information and query of a URL and, with
// hidePath, everything after the host. A URL that does not parse is
// hidden entirely.
func redactURL(s string, hidePath bool) string {
	u, err := url.Parse(s)
	if err != nil {
		return redacted
	}
	if hidePath && (u.User != nil || u.Opaque != "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "") {
		return u.Scheme + "://" + u.Host + "/" + redacted
	}
	return logurl.URL(u)
}
