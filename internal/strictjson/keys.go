package strictjson

import (
	"hash/maphash"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Why case variants count as duplicates: Go's encoding/json (v1, and v2 in
// its v1-compatible mode) matches an object key to a struct field by exact
// name first and then with strings.EqualFold, and when several keys match
// the same field the last one wins. A Go upstream decoding
// {"path":"/tmp/x","Path":"/etc/passwd"} into struct{ Path string } reads
// "/etc/passwd", while a policy that sees the object as a map may check only
// "path". EqualFold uses Unicode simple folding, so "k" also matches the
// Kelvin sign U+212A and "s" the long s U+017F.

// linearKeys is the number of keys up to which a new key is compared with the
// object's earlier keys one by one. Past it the object gets an index of
// folded-key hashes, so a hostile object with many keys costs linear, not
// quadratic, time.
const linearKeys = 8

// foldSeed makes the hashes of folded keys unpredictable, so a client cannot
// choose keys that collide and push the check back to quadratic time.
var foldSeed = maphash.MakeSeed()

// addKey appends k, the key starting at offset off, to the keys of the object
// whose keys begin at d.keys[kbase], unless it equals an earlier key of that
// object under strings.EqualFold. index maps the hash of each earlier folded
// key to the position of a key with that hash; it is nil until the object
// has more than linearKeys keys. addKey returns the (possibly new) index.
func (d *decoder) addKey(kbase int, index map[uint64]int, k keyEntry, off int) (map[uint64]int, error) {
	keys := d.keys[kbase:]
	switch {
	case index == nil:
		if j := matchFold(keys, k); j >= 0 {
			return nil, duplicate(keys[j], k, off)
		}
		if len(keys) == linearKeys {
			index = make(map[uint64]int, 2*linearKeys)
			for j, o := range keys {
				index[d.foldHash(o.s)] = j
			}
			index[d.foldHash(k.s)] = len(keys)
		}
	default:
		h := d.foldHash(k.s)
		j, ok := index[h]
		if !ok {
			index[h] = len(keys)
			break
		}
		if strings.EqualFold(keys[j].s, k.s) {
			return nil, duplicate(keys[j], k, off)
		}
		// Equal hashes, different keys: a 64-bit collision under a random
		// seed. Rare enough to pay a full scan, which keeps the answer
		// exact. (Every earlier key's hash is in the index, so a key whose
		// hash is absent cannot match.)
		if j := matchFold(keys, k); j >= 0 {
			return nil, duplicate(keys[j], k, off)
		}
	}
	d.keys = append(d.keys, k)
	return index, nil
}

// matchFold returns the position of the first key in keys equal to k under
// strings.EqualFold, or -1.
func matchFold(keys []keyEntry, k keyEntry) int {
	for j, o := range keys {
		// ASCII strings of different lengths never fold together; other
		// strings may ("k" is one byte, the Kelvin sign three).
		if o.ascii && k.ascii && len(o.s) != len(k.s) {
			continue
		}
		if strings.EqualFold(o.s, k.s) {
			return j
		}
	}
	return -1
}

func duplicate(earlier, k keyEntry, off int) error {
	if earlier.s == k.s {
		return errorAt(off, reasonDuplicateKey)
	}
	return errorAt(off, reasonCaseVariantKey)
}

// foldHash hashes the folded form of s (see appendFold).
func (d *decoder) foldHash(s string) uint64 {
	d.fold = appendFold(d.fold[:0], s)
	return maphash.Bytes(foldSeed, d.fold)
}

// appendFold appends to dst a form of s such that two valid UTF-8 strings
// have the same form exactly when strings.EqualFold reports them equal: each
// rune is replaced by the smallest rune of its simple case-folding orbit
// (the same canonical form encoding/json uses to look up field names).
func appendFold(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
}

// foldRune returns the smallest rune of r's simple case-folding orbit.
// unicode.SimpleFold steps to the next larger rune of the orbit and wraps
// around to the smallest, so the first step that does not go up lands on it.
func foldRune(r rune) rune {
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}
