package policy

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Why argument names are compared by their letters and digits: binders
// match a JSON key to a parameter more loosely than by exact name. Go's
// encoding/json ignores case; encoding/json/v2 with case:ignore also
// ignores "_" and "-" (filePath, file-path and f_i_l_e_p_a_t_h are all
// file_path); pydantic with a camel-case alias generator and
// populate_by_name takes filePath and file_path alike. A target argument
// sent under such a spelling must still be read as the target, and two
// arguments that bind to one parameter must not be sent together: the
// policy would judge one and the upstream use the other.

// SameArgName reports whether a and b name the same argument for such a
// binder: equal once everything but letters and digits is dropped and
// case is folded (as strings.EqualFold folds it). Names with no letter or
// digit match nothing but themselves.
func SameArgName(a, b string) bool {
	if a == b {
		return true
	}
	i, j := 0, 0
	letters := false
	for {
		ra, na := nextLetter(a, i)
		rb, nb := nextLetter(b, j)
		if na < 0 || nb < 0 {
			return na < 0 && nb < 0 && letters
		}
		if !foldEqual(ra, rb) {
			return false
		}
		letters = true
		i, j = na, nb
	}
}

// nextLetter returns the first letter or digit of s at or after i and the
// offset past it; -1 when there is none.
func nextLetter(s string, i int) (rune, int) {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				return rune(c), i
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r, i
		}
	}
	return 0, -1
}

// foldEqual reports whether r and s are equal under simple case folding.
func foldEqual(r, s rune) bool {
	if r == s {
		return true
	}
	if r < utf8.RuneSelf && s < utf8.RuneSelf {
		return r|0x20 == s|0x20 && 'a' <= r|0x20 && r|0x20 <= 'z'
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == s {
			return true
		}
	}
	return false
}

// ArgKey is name's form under SameArgName, for an index of many names:
// two names with letters or digits have equal ArgKeys exactly when
// SameArgName holds; a name without either has "".
func ArgKey(name string) string {
	b := make([]rune, 0, len(name))
	for i := 0; ; {
		r, n := nextLetter(name, i)
		if n < 0 {
			break
		}
		// The smallest rune of r's fold orbit stands for all of it.
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		b = append(b, low)
		i = n
	}
	return string(b)
}

// CheckArgNames refuses arguments two of which name the same parameter
// under SameArgName ("dry_run" and "dryRun"), at any depth: binders read
// nested models alike (pydantic resolves {"options":{"dry_run":true,
// "dryRun":false}} to dry_run false). Keys equal but for case never get
// here: the JSON decoder refuses them at any depth.
func CheckArgNames(args map[string]any) error {
	if err := checkTwins(args); err != nil {
		return err
	}
	for _, v := range args {
		if err := checkNestedNames(v); err != nil {
			return err
		}
	}
	return nil
}

func checkNestedNames(v any) error {
	switch v := v.(type) {
	case map[string]any:
		return CheckArgNames(v)
	case []any:
		for _, e := range v {
			if err := checkNestedNames(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTwins is CheckArgNames for the keys of one object.
func checkTwins(args map[string]any) error {
	const linear = 8
	if len(args) <= linear {
		var buf [linear]string
		names := buf[:0]
		for a := range args {
			names = append(names, a)
		}
		for i, a := range names {
			for _, b := range names[i+1:] {
				if SameArgName(a, b) {
					return fmt.Errorf("arguments %q and %q name the same parameter for binders that ignore case, '_' and '-' (send one)", min(a, b), max(a, b))
				}
			}
		}
		return nil
	}
	seen := make(map[string]string, len(args))
	for a := range args {
		k := ArgKey(a)
		if k == "" {
			continue
		}
		if b, dup := seen[k]; dup {
			return fmt.Errorf("arguments %q and %q name the same parameter for binders that ignore case, '_' and '-' (send one)", min(a, b), max(a, b))
		}
		seen[k] = a
	}
	return nil
}
