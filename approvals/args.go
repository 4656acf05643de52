package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/reveal"
)

// argSpan is a run of the decoded arguments with one look. Class is ""
// for JSON structure, keys and literals, "str" for a string value's text,
// "esc" for an escape the page keeps (\" \\ \n \t \r) and "hid" for an
// invisible or reordering character spelled out as \uXXXX. Classes are
// this file's constants, never the agent's text.
type argSpan struct {
	Text  string
	Class string
}

// maxArgDepth bounds the nesting decodeArgs follows; deeper arguments are
// shown only as their exact JSON. (Stored arguments passed encoding/json's
// own limit of 10000 already.)
const maxArgDepth = 200

var errArgsTooDeep = errors.New("arguments nested too deeply to show decoded")

// decodeArgs pretty-prints the JSON raw with its strings decoded, so that
// an agent cannot hide "../etc" behind "\u002e\u002e/\u0065tc". Everything
// else stays as sent: numbers are the literals themselves (1e400 is not
// rounded), keys keep their order and duplicates are all shown, because
// the walk reads tokens and never builds a map. It reports whether it
// spelled out a hidden character. Not JSON, or too deep: nil.
//
// A decoded string is shown between quotes with exactly the escapes JSON
// needs to end where it ends: \" and \\ stay, so every bare quote on the
// page is a real string boundary. A newline shows as the escape \n and
// then a real line break: multi-line values (scripts, file contents) read
// as lines, the marker says the break is inside the value, and string text
// has its own colour, so a line of a value cannot pass for a key of the
// object. Tabs and carriage returns stay escapes (one would be blank, the
// other would move the text back). Invisible and bidi characters show as
// \uXXXX, as reveal.String spells them.
func decodeArgs(raw []byte) (spans []argSpan, revealed bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var w argWriter
	if err := w.value(dec, 0); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // more than one value
	}
	return w.done(), w.hidden
}

type argWriter struct {
	spans  []argSpan
	cur    strings.Builder
	class  string
	hidden bool
}

func (w *argWriter) add(class, text string) {
	if class != w.class {
		w.flush()
		w.class = class
	}
	w.cur.WriteString(text)
}

func (w *argWriter) flush() {
	if w.cur.Len() > 0 {
		w.spans = append(w.spans, argSpan{Text: w.cur.String(), Class: w.class})
		w.cur.Reset()
	}
}

func (w *argWriter) done() []argSpan {
	w.flush()
	return w.spans
}

func (w *argWriter) indent(depth int) {
	w.add("", strings.Repeat("  ", depth))
}

func (w *argWriter) value(dec *json.Decoder, depth int) error {
	if depth > maxArgDepth {
		return errArgsTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t != '{' && t != '[' {
			return errors.New("unexpected " + t.String())
		}
		closing := "]"
		if t == '{' {
			closing = "}"
		}
		if !dec.More() {
			w.add("", t.String()+closing)
			_, err := dec.Token()
			return err
		}
		w.add("", t.String()+"\n")
		for first := true; dec.More(); first = false {
			if !first {
				w.add("", ",\n")
			}
			w.indent(depth + 1)
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return errors.New("object key is not a string")
				}
				w.str(key, "")
				w.add("", ": ")
			}
			if err := w.value(dec, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		w.add("", "\n")
		w.indent(depth)
		w.add("", closing)
	case string:
		w.str(t, "str")
	case json.Number:
		w.add("", t.String())
	case bool:
		w.add("", strconv.FormatBool(t))
	case nil:
		w.add("", "null")
	}
	return nil
}

// str writes a decoded string, quoted, in class (see decodeArgs).
func (w *argWriter) str(s, class string) {
	w.add(class, `"`)
	for _, r := range s { // the decoder made s valid UTF-8
		switch {
		case r == '"':
			w.add("esc", `\"`)
		case r == '\\':
			w.add("esc", `\\`)
		case r == '\n':
			w.add("esc", `\n`)
			w.add(class, "\n")
		default:
			w.char(r, class)
		}
	}
	w.add(class, `"`)
}

// char writes r in class, tabs and carriage returns as escapes (class
// "esc") and characters that hide or reorder text spelled out as
// reveal.String spells them (class "hid").
func (w *argWriter) char(r rune, class string) {
	switch {
	case r == '\t':
		w.add("esc", `\t`)
	case r == '\r':
		w.add("esc", `\r`)
	case reveal.Hidden(r):
		w.hidden = true
		w.add("hid", reveal.String(string(r)))
	default:
		w.add(class, string(r))
	}
}

// revealSpans is s in spans as the page shows a header: every character
// that hides or reorders text spelled out as reveal spells it, in class
// "hid", and tabs and line breaks as escapes, in class "esc" (a header
// value is one line). It reports whether it spelled out a hidden
// character. Invalid UTF-8 shows as U+FFFD.
func revealSpans(s string) (spans []argSpan, revealed bool) {
	var w argWriter
	for _, r := range s {
		if r == '\n' {
			w.add("esc", `\n`) // one line
			continue
		}
		w.char(r, "")
	}
	return w.done(), w.hidden
}
