package proxy

import (
	"net/http"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/policy"
)

// modeOf is the permission mode of c (docs/policy.md, modes), from the
// most specific place that sets one: the mode header, when its sender is
// a trusted subject; the subject's mode; the upstream's; Config.Mode. The
// header is read before the request's headers are cleaned, and never
// reaches the upstream: it speaks to toolgate. From anybody else it is
// ignored, so an agent cannot talk its way out of an ask.
func (s *Server) modeOf(r *http.Request, c *call) (string, *answer) {
	if name := s.cfg.ModeHeader; name != "" {
		values := r.Header.Values(name)
		r.Header.Del(name)
		if len(values) > 0 && slices.Contains(s.cfg.ModeHeaderSubjects, c.subject.ID) {
			if len(values) > 1 || !slices.Contains(policy.Modes(), values[0]) {
				return "", invalid(http.StatusBadRequest, "Bad mode", name+" must be sent once, as one of "+joinModes())
			}
			return values[0], nil
		}
	}
	return policy.ConfiguredMode(s.cfg.SubjectModes, c.subject.ID, c.up.Mode, s.cfg.Mode), nil
}

func joinModes() string {
	ms := policy.Modes()
	return strings.Join(ms[:len(ms)-1], ", ") + " or " + ms[len(ms)-1]
}
