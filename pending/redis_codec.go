package pending

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// reply splits a per-call script's reply into its code and call.
func reply(id string, v []any) (code string, c Call, err error) {
	if len(v) == 0 {
		return "", Call{}, errors.New("pending: empty reply from Redis")
	}
	code, _ = v[0].(string)
	if len(v) > 2 {
		id, _ = v[2].(string) // attached: the call that was found
	}
	if len(v) > 1 {
		c, err = decodeFlat(id, v[1])
	}
	return code, c, err
}

// decodeFlat decodes an HGETALL reply (field, value, …) returned by a
// script.
func decodeFlat(id string, v any) (Call, error) {
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return Call{}, fmt.Errorf("pending: unexpected call encoding %T", v)
	}
	return decodeCall(id, func(yield func(string, string) bool) {
		for i := 0; i < len(flat); i += 2 {
			f, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			if !yield(f, v) {
				return
			}
		}
	})
}

// decodeList decodes a reply {id, call, id, call, …}.
func decodeList(v []any) ([]Call, error) { return decodePairs(v, "list", decodeFlat) }

// decodePairs decodes a reply {id, record, id, record, …} of what records.
func decodePairs[T any](v []any, what string, decode func(id string, v any) (T, error)) ([]T, error) {
	if len(v)%2 != 0 {
		return nil, errors.New("pending: unexpected " + what + " reply")
	}
	var out []T
	for i := 0; i < len(v); i += 2 {
		id, _ := v[i].(string)
		r, err := decode(id, v[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// decodeCall builds a call from its hash fields (see redis_scripts.go).
func decodeCall(id string, fields func(yield func(field, value string) bool)) (Call, error) {
	c := Call{ID: id}
	var res Result
	hasResult := false
	var err error
	ms := func(v string) time.Time {
		n, e := strconv.ParseInt(v, 10, 64)
		err = cmpErr(err, e)
		return time.UnixMilli(n)
	}
	same := false // "aa": AttachKey is ArgsKey
	for f, v := range fields {
		switch f {
		case "st":
			c.State = State(v)
		case "aa":
			same = true
		case "ak":
			c.AttachKey = v
		case "ag":
			c.ArgsKey = v
		case "ad":
			c.ArgsDigest = v
		case "sb":
			c.Subject = v
		case "up":
			c.Upstream = v
		case "tl":
			c.Tool = v
		case "pr":
			c.Principal = v
		case "rq":
			c.Request = []byte(v)
		case "rd":
			c.RequestDigest = v
		case "in":
			c.Info = []byte(v)
		case "bf":
			c.Brief = []byte(v)
		case "ca":
			c.CreatedAt = ms(v)
		case "ea":
			c.ExpiresAt = ms(v)
		case "by":
			c.DecidedBy = v
		case "cm":
			c.Comment = v
		case "da":
			c.DecidedAt = ms(v)
		case "qm":
			n, e := decodeInts(v)
			c.Quorum, err = n, cmpErr(err, e)
		case "ap":
			as, e := decodeApprovals(v)
			c.Approvals, err = as, cmpErr(err, e)
		case "fe":
			n, e := strconv.ParseInt(v, 10, 64)
			c.Fence, err = n, cmpErr(err, e)
		case "lu":
			c.LeaseUntil = ms(v)
		case "rs":
			n, e := strconv.Atoi(v)
			res.Status, hasResult, err = n, true, cmpErr(err, e)
		case "rh":
			err = cmpErr(err, json.Unmarshal([]byte(v), &res.Header))
		case "rb":
			res.Body = []byte(v)
		case "rt":
			res.Truncated = v == "1"
		case "dl":
			c.Delivered = v == "1"
		}
	}
	if err != nil {
		return Call{}, fmt.Errorf("pending: decoding call %s: %w", id, err)
	}
	if hasResult {
		c.Result = &res
	}
	if same {
		c.AttachKey = c.ArgsKey
	}
	return c, nil
}

// cmpErr keeps the first error.
func cmpErr(old, e error) error {
	if old != nil {
		return old
	}
	return e
}

// encodeBody is a call's body key (see body in redis_scripts.go): the
// lengths of its Brief, Info and Request on one line, then the three.
func encodeBody(c Call) []byte {
	b := make([]byte, 0, 24+len(c.Brief)+len(c.Info)+len(c.Request))
	b = strconv.AppendInt(b, int64(len(c.Brief)), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(c.Info)), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(c.Request)), 10)
	b = append(b, '\n')
	b = append(b, c.Brief...)
	b = append(b, c.Info...)
	return append(b, c.Request...)
}

// decodeBody yields the fields of a body key's value (encodeBody) as
// bf, in and rq; nothing for a body that is missing or malformed.
func decodeBody(b string, yield func(field, value string) bool) {
	head, rest, ok := strings.Cut(b, "\n")
	if !ok {
		return
	}
	for _, f := range []string{"bf", "in", "rq"} {
		num, more, _ := strings.Cut(head, " ")
		head = more
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > len(rest) {
			return
		}
		if n > 0 && !yield(f, rest[:n]) {
			return
		}
		rest = rest[n:]
	}
}
