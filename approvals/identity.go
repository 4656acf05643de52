package approvals

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/approvals/signin"
)

// addApprovers records the approvers' keys and groups. Names are unique,
// ignoring case; keys are optional and, when set, unique. An entry's
// groups go to its name however the approver is known: the key, or signed
// in or clicking in Slack under that name. So the identity source must
// name people as they cannot choose to be named (a verified e-mail, not a
// display name): whoever it calls "deploy-bot" gets deploy-bot's groups.
func (h *Handler) addApprovers(approvers []Approver) error {
	seen := map[[sha256.Size]byte]bool{}
	names := map[string]bool{}
	for i, a := range approvers {
		if a.Name == "" {
			return fmt.Errorf("approvals: approver %d has an empty name", i)
		}
		if names[nameKey(a.Name)] {
			return fmt.Errorf("approvals: approver %q is listed twice (names are compared ignoring ASCII case)", a.Name)
		}
		names[nameKey(a.Name)] = true
		// The groups belong to the name however the approver is known:
		// by this key, or signed in or clicking in Slack as this name.
		h.groups[nameKey(a.Name)] = slices.Clone(a.Groups)
		if a.Key == "" {
			continue // groups only: no API access
		}
		k := approverKey{name: a.Name, sum: sha256.Sum256([]byte(a.Key)), groups: slices.Clone(a.Groups)}
		if seen[k.sum] {
			return fmt.Errorf("approvals: approver %q shares a key with another approver", a.Name)
		}
		seen[k.sum] = true
		h.keys = append(h.keys, k)
	}
	return nil
}

// nameKey is an approver's name as names compare: ignoring ASCII case
// alone, as the store tells approvers apart when it counts a quorum
// (pending's asciiEqualFold and its Redis script). A Unicode folding here
// gave "ÉLISE" the groups of "élise", whom the quorum counted as another
// approver, and the Kelvin sign's "Karl" those of "karl".
func nameKey(name string) string {
	for i := 0; i < len(name); i++ {
		if 'A' <= name[i] && name[i] <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}

// signOutURL is where a signed-in approver's pages post to sign out, ""
// when nobody signs in here.
func (h *Handler) signOutURL() string {
	if h.identity == nil {
		return ""
	}
	return h.identity.LogoutURL()
}

// known completes an approver known by sign-in or Slack with the groups
// the approvers entry of their name gives, beside those their identity
// source gave.
func (h *Handler) known(a signin.Approver) signin.Approver {
	// Names compare ignoring case, as they do everywhere else: an identity
	// source that spells Carol@Example.com names carol@example.com.
	for _, g := range h.groups[nameKey(a.Name)] {
		if !slices.Contains(a.Groups, g) {
			a.Groups = append(a.Groups, g)
		}
	}
	return a
}

// pageApprover is who makes a page request: nil when the listener has no
// identity configured (a link alone decides); else the signed-in approver,
// or errSignInRequired.
func (h *Handler) pageApprover(r *http.Request) (*signin.Approver, error) {
	if h.identity == nil {
		return nil, nil
	}
	a, err := h.identity.Identify(r)
	if err != nil {
		if errors.Is(err, signin.ErrNoIdentity) {
			return nil, fmt.Errorf("%w (%w)", errSignInRequired, err)
		}
		return nil, err
	}
	a = h.known(a)
	return &a, nil
}

// signIn sends a browser that has no identity to where it gets one, when
// the identity source can log people in (oidc); it reports whether it did.
// Only GET and HEAD are sent: a form post must not be lost in a redirect.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request, err error) bool {
	if h.identity == nil || !errors.Is(err, errSignInRequired) || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	login := h.identity.LoginURL(r.URL.RequestURI())
	if login == "" {
		return false
	}
	http.Redirect(w, r, login, http.StatusSeeOther)
	return true
}

// keyApprover returns the approver whose key is the request's bearer
// token. Every key is compared, in constant time, so the answer's timing
// tells neither which key matched nor how close a guess came.
func (h *Handler) keyApprover(r *http.Request) (signin.Approver, bool) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return signin.Approver{}, false
	}
	scheme, key, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return signin.Approver{}, false
	}
	sum := sha256.Sum256([]byte(key))
	var match *approverKey
	for i := range h.keys {
		if subtle.ConstantTimeCompare(sum[:], h.keys[i].sum[:]) == 1 {
			match = &h.keys[i]
		}
	}
	if match == nil {
		return signin.Approver{}, false
	}
	return signin.Approver{Name: match.name, Groups: slices.Clone(match.groups), Via: viaKey}, true
}
