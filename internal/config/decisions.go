package config

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/toolgate/toolgate/approvals/signin"
)

// dataPath is a decision path as OPA's decision_logs.mask_decision takes
// it: slash-separated names under data, "/system/log/mask".
var dataPath = regexp.MustCompile(`^(/[A-Za-z_][A-Za-z0-9_]*)+$`)

// decisions checks log.decisions.
func (v *validator) decisions(d *Decisions) {
	for key, p := range map[string]string{"log.decisions.mask_decision": d.MaskDecision, "log.decisions.drop_decision": d.DropDecision} {
		if !dataPath.MatchString(p) {
			v.add(key, fmt.Sprintf("%q is not a data path", p), "write the rule's path under data with slashes, e.g. /system/log/mask")
		}
	}
	s := &d.Service
	if s.URL == "" {
		if s.Token != "" {
			v.add("log.decisions.service.token", "is set but log.decisions.service.url is not", "set the log service's url, or remove the token")
		}
		return
	}
	v.httpURL("log.decisions.service.url", s.URL)
	if u, err := url.Parse(s.URL); err == nil && u.Scheme == "http" && (s.Token != "" || u.User != nil || u.RawQuery != "") && !signin.Loopback(u.Hostname()) {
		// The token (or one in the query: ?api_key=...), and the events
		// (approvers' names and comments, arguments with log.arguments),
		// would cross the network in clear.
		v.add("log.decisions.service.url", "is http:// to a host off loopback, with a token, user information or a query",
			"use https://, or http:// to a loopback address (a local agent)")
	}
	if len(s.Resource) == 0 || s.Resource[0] != '/' {
		v.add("log.decisions.service.resource", "does not start with /", "write a path such as /logs")
	}
	if b := s.BufferBytes; b < 1<<10 || b > 1<<30 {
		v.add("log.decisions.service.buffer_bytes", fmt.Sprintf("%s is outside 1KiB..1GiB", b), "write a size such as 16MiB")
	}
	if s.MinDelay.Std() < time.Second {
		v.add("log.decisions.service.min_delay", "is under 1s", "OPA counts upload delays in whole seconds; write 1s or more")
	}
	if s.MaxDelay < s.MinDelay {
		v.add("log.decisions.service.max_delay", "is shorter than log.decisions.service.min_delay", "make max_delay at least min_delay")
	}
	if s.Timeout < 0 {
		v.add("log.decisions.service.timeout", "is negative", "write a duration such as 10s")
	}
}
