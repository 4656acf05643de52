package policy

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// The authority of a URL target is read as WHATWG URL parsers (browsers,
// Node's fetch, undici) and HTTP clients read it, so that a deny or ask row
// naming a host sees every spelling that reaches it: without this,
// "https://user@evil.com/x", "https://evil.com./x", "https://evil.com:443/x",
// "https://%65vil.com/x", "https://ＥＶＩＬ．com/x" and "https://0x7f.1/" each
// slipped past a row on "https://evil.com/**" or "http://127.0.0.1/**".

// defaultPorts are the ports a special scheme's URL goes to without one.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}

// hostProfile maps a host as the WHATWG URL standard's "domain to ASCII"
// does (UTS #46, non-transitional, joiners and bidi checked, hyphens and
// lengths not, no STD3 rules: real hosts have underscores). A host it
// refuses (a joiner where UTS #46 allows none) is unreadable: curl's
// transitional retry deletes such characters ("local\u200dhost" reaches
// localhost).
var hostProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false),
	idna.CheckHyphens(false), idna.CheckJoiners(true), idna.BidiRule(), idna.VerifyDNSLength(false))

// specialSlashes rewrites "https:/x", "https:x" (the latter in a url or uri
// argument only) and "https:///x" as "https://x": a WHATWG parser skips any
// number of slashes after a special scheme's colon. s has slashes for
// backslashes already.
func specialSlashes(s string, urlArg bool) string {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	if _, special := defaultPorts[strings.ToLower(scheme)]; !special {
		return s
	}
	if !urlArg && !strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "//") && !strings.HasPrefix(rest, "///") {
		return s // not a URL, or two slashes already: nothing to rewrite
	}
	if trimmed := strings.TrimLeft(rest, "/"); trimmed != rest || urlArg {
		return scheme + "://" + trimmed
	}
	return s
}

// fileURL writes a file: URL as a WHATWG parser reads it (browsers,
// Node's URL), which is also the path Go's url.Parse and Python's urlparse
// give: "file:/p" and "file:p" are "file:///p", and the host localhost is
// no host ("file://localhost/p" is "file:///p"). Without this, a row on
// "file:///srv/secrets/**" did not see "file:/srv/secrets/key". s has
// slashes for backslashes already.
func fileURL(s string) string {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || !strings.EqualFold(scheme, "file") {
		return s
	}
	if !strings.HasPrefix(rest, "//") {
		return "file:///" + strings.TrimLeft(rest, "/")
	}
	host, tail, _ := strings.Cut(rest[2:], "/")
	if strings.EqualFold(host, "localhost") {
		return "file:///" + tail
	}
	return "file:" + rest
}

// canonicalAuthority rewrites the authority of s ("scheme://authority…")
// as the host it reaches: no user information, the host percent-decoded,
// mapped as a lookup maps it and written in ASCII (xn-- for an
// internationalised name), without a trailing dot, an IPv4 address in any
// notation a WHATWG parser reads (hex, octal, fewer parts) written in
// dotted decimal, an IPv6 address in its canonical form (an IPv4-mapped
// one as the IPv4 address it reaches), and a special scheme's default
// port dropped. unicode is the host in Unicode when that differs from
// its ASCII form, else "". ok is false for a host it cannot read, and for
// a special scheme without a host.
func canonicalAuthority(s string) (out, unicode string, ok bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return s, "", true
	}
	scheme := strings.ToLower(s[:i])
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	at := strings.LastIndexByte(authority, '@')
	if at >= 0 {
		authority = authority[at+1:]
	}
	written, writtenPort := splitHostPort(authority)
	host, unicode, ok := canonicalHost(written)
	if !ok || host == "" && defaultPorts[scheme] != "" || unspecifiedHost(host) {
		return "", "", false // no host that every client reads alike
	}
	port := writtenPort
	if p, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(p, 10) // "0443" is 443
	}
	if port == defaultPorts[scheme] {
		port = ""
	}
	if s[:i] == scheme && at < 0 && host == written && port == writtenPort && !strings.HasSuffix(authority, ":") {
		return s, unicode, true // as written already: the common case allocates nothing
	}
	if port == "" {
		return scheme + "://" + host + tail, unicode, true
	}
	return scheme + "://" + host + ":" + port + tail, unicode, true
}

// unspecifiedHost reports whether host, as canonicalHost writes it, is the
// unspecified address (0.0.0.0, [::], and their other spellings, which
// canonicalHost writes so): Linux and macOS connect to it as to the local
// host, Windows refuses it, so it is no host a row can name: a row on
// "http://127.0.0.1/**" would not see "http://0:8080/admin".
func unspecifiedHost(host string) bool { return host == "0.0.0.0" || host == "[::]" }

// readableAuthority reports whether clients agree on where the authority
// of raw (a URL as sent, backslashes and all) ends. A WHATWG parser ends
// it at a backslash, as at a slash; curl and RFC 3986 parsers do not, so
// "http://good.com\@evil.com/" goes to good.com in a browser and to
// evil.com with curl. A backslash before the authority's end ("/", "?"
// or "#") makes the URL unreadable.
func readableAuthority(raw string) bool {
	_, after, ok := strings.Cut(raw, ":")
	if !ok {
		return true
	}
	rest := strings.TrimLeft(after, `/\`)
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	return !strings.Contains(rest, `\`)
}

// escapeStrayPercents writes a "%" that starts no escape ("/a%zz", "#%")
// as "%25", as clients send it or read it, rather than let the URL go
// unparsed.
func escapeStrayPercents(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// splitHostPort splits an authority without user information into its
// host and port ("" when none, or when it is empty: "evil.com:").
func splitHostPort(a string) (host, port string) {
	if strings.HasPrefix(a, "[") {
		if j := strings.IndexByte(a, ']'); j >= 0 {
			host, rest := a[:j+1], a[j+1:]
			port, _ = strings.CutPrefix(rest, ":")
			return host, port
		}
		return a, ""
	}
	if j := strings.LastIndexByte(a, ':'); j >= 0 {
		return a[:j], a[j+1:]
	}
	return a, ""
}

// canonicalHost is the host h reaches, in ASCII, and in Unicode when that
// differs; ok is false for a host it cannot read.
func canonicalHost(h string) (ascii, unicode string, ok bool) {
	if inner, bracketed := strings.CutPrefix(h, "["); bracketed {
		a, err := netip.ParseAddr(strings.TrimSuffix(inner, "]"))
		if err != nil {
			return "", "", false
		}
		// A zone scopes a link-local address to an interface; the
		// address is what a row names.
		a = a.WithZone("")
		if a.Is4In6() {
			return a.Unmap().String(), "", true
		}
		return "[" + a.String() + "]", "", true
	}
	ascii = h
	if !plainHost(h) {
		if strings.Contains(h, "%") {
			d, err := url.PathUnescape(h)
			if err != nil {
				return "", "", false
			}
			h = d
		}
		var err error
		if ascii, err = hostProfile.ToASCII(h); err != nil {
			return "", "", false
		}
	}
	// One trailing dot is the root of the DNS: "evil.com." is evil.com.
	if t := strings.TrimSuffix(ascii, "."); t != "" && !strings.HasSuffix(t, ".") {
		ascii = t
	}
	if a, ok := whatwgIPv4(ascii); ok {
		return a, "", true
	}
	if strings.Contains(ascii, "xn--") {
		if u, err := hostProfile.ToUnicode(ascii); err == nil && u != ascii {
			unicode = u
		}
	}
	return ascii, unicode, true
}

// plainHost reports whether h is a host the lookup mapping leaves as it
// is, so that it need not run: lower-case ASCII letters, digits, "-", "_"
// and dots between labels, no xn-- label (which the mapping checks).
func plainHost(h string) bool {
	if h == "" || h[0] == '.' || strings.Contains(h, "..") || strings.Contains(h, "xn--") {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// whatwgIPv4 reads h as the WHATWG URL standard reads an IPv4 host, when
// its last label is a number: one to four parts, each decimal, octal
// (leading 0) or hex (0x), the last filling the remaining bytes
// ("0x7f.1" is 127.0.0.1, "2130706433" too). It returns the address in
// dotted decimal.
func whatwgIPv4(h string) (string, bool) {
	if last := h[strings.LastIndexByte(h, '.')+1:]; last == "" || last[0] < '0' || last[0] > '9' {
		return "", false // a name: its last label is no number
	}
	parts := strings.Split(h, ".")
	if last := parts[len(parts)-1]; last == "" || !isIPv4Number(last) {
		return "", false
	}
	if len(parts) > 4 {
		return "", false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return "", false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return "", false
		}
		v |= n << (8 * (3 - i))
	}
	lastN := nums[len(nums)-1]
	if lastN >= 1<<(8*(5-len(nums))) {
		return "", false
	}
	v |= lastN
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String(), true
}

// isIPv4Number reports whether p reads as a number in a WHATWG IPv4 host.
func isIPv4Number(p string) bool {
	_, ok := ipv4Number(p)
	return ok
}

func ipv4Number(p string) (uint64, bool) {
	base := 10
	switch {
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if p == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}
