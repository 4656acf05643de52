package approvals

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// MinSecretBytes is the shortest secret NewSigner accepts: an HMAC-SHA256
// key shorter than the hash gives away strength for nothing.
const MinSecretBytes = 32

// tokenVersion starts every token. A replica that meets another version
// refuses the token rather than guess at its layout (docs/security.md, X10).
const tokenVersion = "v1"

// Token errors. Both mean "this link does not decide this call"; the
// approvals page answers 403 for either.
var (
	// ErrTokenInvalid: malformed, tampered, signed with another secret, or
	// made for another call, another request digest or another expiry.
	ErrTokenInvalid = errors.New("approvals: invalid approval token")
	// ErrTokenExpired: a genuine token whose call's expiry has passed.
	ErrTokenExpired = errors.New("approvals: approval token expired")
)

// Signer makes and checks approval-link tokens. A token is
//
//	v1.<expiry, unix seconds>.<base64url HMAC-SHA256>
//
// where the MAC covers the version tag, the call ID, the digest of the exact
// request (pending.Call.RequestDigest) and the expiry. A token therefore
// decides one call, only as it was evaluated, and only until it expires
// (docs/security.md, INV-7). It carries no data an approver could trust: the page
// shows the call from the store. A Signer is safe for concurrent use.
//
// Rotation. A Signer signs with its secret and accepts tokens signed with
// it or with any of its previous secrets, so that the secret can change
// without invalidating the links, confirmation links and forms already
// handed out: they verify until they expire, and a previous secret can be
// dropped once pending.ttl has passed since it stopped signing.
type Signer struct {
	keys [][]byte    // keys[0], the secret, signs; every one verifies
	macs []sync.Pool // macs[i]: *macState keyed with keys[i]
}

// macState is an HMAC-SHA256 keyed with one of a Signer's keys, and the
// buffer its input is gathered in. It is reused, through its key's pool,
// because keying an HMAC costs two SHA-256 blocks and a few allocations,
// and every parked call's link is signed.
type macState struct {
	h   hash.Hash
	buf []byte
}

// MaxPreviousSecrets bounds the previous secrets a Signer accepts: each
// one is one more MAC per token checked.
const MaxPreviousSecrets = 4

// NewSigner returns a Signer that signs with secret and also accepts what
// previous secrets signed (each at least MinSecretBytes, at most
// MaxPreviousSecrets of them). The secrets are copied.
func NewSigner(secret []byte, previous ...[]byte) (*Signer, error) {
	if len(previous) > MaxPreviousSecrets {
		return nil, errors.New("approvals: at most " + strconv.Itoa(MaxPreviousSecrets) + " previous approval secrets")
	}
	s := &Signer{}
	for _, k := range append([][]byte{secret}, previous...) {
		if len(k) < MinSecretBytes {
			return nil, errors.New("approvals: an approval secret must be at least " + strconv.Itoa(MinSecretBytes) + " bytes")
		}
		s.keys = append(s.keys, bytes.Clone(k))
	}
	s.macs = make([]sync.Pool, len(s.keys))
	return s, nil
}

// Token purposes: a token of one purpose is never one of another.
const (
	purposeApproval = "toolgate-approval-" + tokenVersion
	purposeConfirm  = "toolgate-confirm-" + tokenVersion
)

// Token returns the token for c: it binds c.ID, c.RequestDigest and
// c.ExpiresAt. The expiry is kept to the second because stores need not
// keep nanoseconds; the token then ends up to a second before the call.
func (s *Signer) Token(c pending.Call) string { return s.token(purposeApproval, c) }

// ConfirmToken returns the token of c's confirmation page, which the
// requester's MCP client is handed (URL elicitation): it binds what Token
// binds, for another purpose, so it opens no approval page and an
// approval link opens no confirmation page.
func (s *Signer) ConfirmToken(c pending.Call) string { return s.token(purposeConfirm, c) }

// Check reports whether token decides c at now: nil, ErrTokenInvalid or
// ErrTokenExpired. The MAC is compared in constant time, and the expiry in
// the token is believed only after the MAC has been verified.
func (s *Signer) Check(token string, c pending.Call, now time.Time) error {
	return s.check(purposeApproval, token, c, now)
}

// CheckConfirm is Check for a ConfirmToken.
func (s *Signer) CheckConfirm(token string, c pending.Call, now time.Time) error {
	return s.check(purposeConfirm, token, c, now)
}

func (s *Signer) token(purpose string, c pending.Call) string {
	exp := c.ExpiresAt.Unix()
	mac := s.mac(purpose, c.ID, c.RequestDigest, exp)
	return tokenVersion + "." + strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(mac[:])
}

func (s *Signer) check(purpose, token string, c pending.Call, now time.Time) error {
	version, rest, ok := strings.Cut(token, ".")
	if !ok || version != tokenVersion {
		return ErrTokenInvalid
	}
	expText, sigText, ok := strings.Cut(rest, ".")
	if !ok {
		return ErrTokenInvalid
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != expText { // one spelling per expiry: no "+5" or "05"
		return ErrTokenInvalid
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sigText)
	if err != nil {
		return ErrTokenInvalid
	}
	if !s.verify(sig, purpose, c.ID, c.RequestDigest, strconv.FormatInt(exp, 10)) {
		return ErrTokenInvalid
	}
	// A genuine token for this call and request, but made for another
	// expiry than the store now records: not this call as it stands.
	// Except for an earlier one on a decided call: an approval in the
	// call's last moments moved its expiry on (the approved window), and
	// the links sent before it still show the decision; deciding through
	// them is refused by the store (409).
	if exp != c.ExpiresAt.Unix() && !movedByDecision(c, exp) {
		return ErrTokenInvalid
	}
	if !now.Before(time.Unix(exp, 0)) {
		return ErrTokenExpired
	}
	return nil
}

// movedByDecision reports whether exp is an expiry decided call c had
// before its decision moved it on.
func movedByDecision(c pending.Call, exp int64) bool {
	return c.State != pending.Waiting && !c.DecidedAt.IsZero() && exp < c.ExpiresAt.Unix()
}

// ApprovalURL returns the signed link to c's approval page:
// publicURL + "/approvals/" + id + "?token=" + token.
func (s *Signer) ApprovalURL(publicURL string, c pending.Call) string {
	return strings.TrimRight(publicURL, "/") + "/approvals/" + url.PathEscape(c.ID) +
		"?token=" + url.QueryEscape(s.Token(c))
}

// ConfirmURL returns the link to c's confirmation page, for its
// requester: publicURL + "/confirm/" + id + "?token=" + ConfirmToken.
func (s *Signer) ConfirmURL(publicURL string, c pending.Call) string {
	return strings.TrimRight(publicURL, "/") + "/confirm/" + url.PathEscape(c.ID) +
		"?token=" + url.QueryEscape(s.ConfirmToken(c))
}

// FormToken returns the token of the decision form shown to a signed-in
// approver for call id (a CSRF token): it binds the approver's name and the
// call, so another site can neither read nor forge it, and it serves no
// other approver and no other call.
func (s *Signer) FormToken(approver, id string) string {
	mac := s.macOf("toolgate-form-"+tokenVersion, approver, id)
	return base64.RawURLEncoding.EncodeToString(mac[:])
}

// CheckFormToken reports, in constant time, whether token is
// FormToken(approver, id).
func (s *Signer) CheckFormToken(token, approver, id string) bool {
	sig, err := base64.RawURLEncoding.Strict().DecodeString(token)
	return err == nil && s.verify(sig, "toolgate-form-"+tokenVersion, approver, id)
}

// mac is the MAC of a link token of purpose.
func (s *Signer) mac(purpose, id, digest string, exp int64) [sha256.Size]byte {
	return s.macOf(purpose, id, digest, strconv.FormatInt(exp, 10))
}

// verify reports whether sig is the MAC of fields under the secret or a
// previous one, each compared in constant time.
func (s *Signer) verify(sig []byte, fields ...string) bool {
	for i := range s.keys {
		if mac := s.macWith(i, fields); hmac.Equal(sig, mac[:]) {
			return true
		}
	}
	return false
}

// macOf is the MAC of fields under the secret that signs.
func (s *Signer) macOf(fields ...string) [sha256.Size]byte { return s.macWith(0, fields) }

// maxMACBuffer bounds the input buffer a macState keeps for the next MAC.
const maxMACBuffer = 4 << 10

// macWith is HMAC-SHA256 under keys[i] over a purpose tag and fields, each
// prefixed with its length so that no two field lists encode alike
// ("ab"+"c" and "a"+"bc" differ), and no token of one purpose is one of
// another.
func (s *Signer) macWith(i int, fields []string) (sum [sha256.Size]byte) {
	m, _ := s.macs[i].Get().(*macState)
	if m == nil {
		m = &macState{h: hmac.New(sha256.New, s.keys[i])}
	}
	m.buf = m.buf[:0]
	for _, f := range fields {
		m.buf = binary.AppendUvarint(m.buf, uint64(len(f)))
		m.buf = append(m.buf, f...)
	}
	m.h.Reset()
	m.h.Write(m.buf)
	m.buf = m.h.Sum(m.buf[:0])
	copy(sum[:], m.buf)
	if cap(m.buf) <= maxMACBuffer {
		s.macs[i].Put(m)
	}
	return sum
}
