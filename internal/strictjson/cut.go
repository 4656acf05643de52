package strictjson

import (
	"encoding/json"
	"slices"
	"strings"
)

// Cut returns data without the object member that path names (a key of
// the top-level object, then a key of that member's object, and so on),
// every other byte as it was, and whether there was such a member.
//
// data must be a text [Decode] accepts: its keys are unique in each
// object, also after unescaping, so path names one member at most, and no
// other reading of data could keep it. Keys are compared unescaped, as
// every parser reads them ("\u0074ask" is "task"). The member goes with
// the comma that separated it from a neighbour, so what is left is JSON
// again.
func Cut(data []byte, path ...string) ([]byte, bool) {
	text := string(data)
	i := 0
	for depth, key := range path {
		i = skipSpace(text, i)
		if i >= len(data) || data[i] != '{' {
			return data, false
		}
		prevEnd, first := i+1, true // the end of '{', then of the member before
		for {
			k := skipSpace(text, prevEnd)
			if k < len(data) && data[k] == ',' {
				k = skipSpace(text, k+1)
			}
			if k >= len(data) || data[k] != '"' {
				return data, false // '}': no such member
			}
			kEnd := skipString(text, k)
			var name string
			if kEnd < 0 || json.Unmarshal(data[k:kEnd], &name) != nil {
				return data, false
			}
			v := skipSpace(text, kEnd)
			if v >= len(data) || data[v] != ':' {
				return data, false
			}
			v = skipSpace(text, v+1)
			if name == key && depth < len(path)-1 {
				i = v // into the member's value
				break
			}
			vEnd := skipValue(text, v)
			if vEnd < 0 {
				return data, false
			}
			if name != key {
				prevEnd, first = vEnd, false
				continue
			}
			// Not the first member: from the end of the one before, its
			// comma included. The first: from its key to the next key, the
			// comma between them included.
			start, end := prevEnd, vEnd
			if first {
				start = k
				if c := skipSpace(text, end); c < len(data) && data[c] == ',' {
					end = skipSpace(text, c+1)
				}
			}
			return slices.Concat(data[:start], data[end:]), true
		}
	}
	return data, false
}

// skipString returns the end of the string that opens at data[i] (just
// past its closing quote), or -1 when it is not closed.
func skipString(data string, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the end of the value that starts at data[i], or -1.
func skipValue(data string, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end := skipString(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // a number, true, false or null
		j := i
		for j < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[j])) {
			j++
		}
		return j
	}
}
