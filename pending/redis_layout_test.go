package pending

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestRedisEarlierLayout: a call an earlier release stored as a hash and a
// body key is read as it was parked (Get, the waiter's state, both lists,
// the sweeper's list) and goes through its whole life; its first
// transition rewrites it as one key and drops the body key.
func TestRedisEarlierLayout(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)
	want := get(t, s, c.ID)

	// Rewrite it as the earlier release stored it.
	key, body := s.callKey(c.ID), s.baseOf(c.ID)+"body:"+c.ID
	ttl := rdb.PTTL(ctx, key).Val()
	fields := []any{
		"st", string(Waiting), "ca", strconv.FormatInt(c.CreatedAt.UnixMilli(), 10),
		"ea", strconv.FormatInt(c.ExpiresAt.UnixMilli(), 10),
		"ak", c.AttachKey, "ag", c.ArgsKey, "ad", c.ArgsDigest, "sb", c.Subject, "up", c.Upstream,
		"tl", c.Tool, "pr", c.Principal, "rd", c.RequestDigest,
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	lens, data := largeFields(c)
	if err := rdb.Set(ctx, body, lens+"\n"+string(data), ttl).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, key, ttl)

	if got := get(t, s, c.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("an earlier release's call reads as\n%+v\nwant\n%+v", got, want)
	}
	if st, err := s.state(ctx, c.ID); err != nil || st != Waiting {
		t.Errorf("its state reads as %q, %v; want waiting", st, err)
	}
	briefs, err := s.ListBrief(ctx, Waiting, 10)
	if err != nil || len(briefs) != 1 || string(briefs[0].Brief) != string(c.Brief) || briefs[0].Request != nil {
		t.Errorf("ListBrief = %+v, %v; want the call with its brief alone", briefs, err)
	}
	if all, err := s.List(ctx, Waiting, 10); err != nil || len(all) != 1 || !reflect.DeepEqual(all[0], want) {
		t.Errorf("List = %+v, %v; want the whole call", all, err)
	}

	approved, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice", Comment: "fine"})
	if err != nil || approved.State != Approved || string(approved.Info) != string(c.Info) {
		t.Fatalf("Decide = %s, %v; want approved with its info", approved.State, err)
	}
	if got := get(t, s, c.ID); string(got.Request) != string(c.Request) {
		t.Fatalf("the approved call's request reads as %q, want %q", got.Request, c.Request)
	}
	if typ := rdb.Type(ctx, key).Val(); typ != "string" {
		t.Errorf("after its first transition the call is a %s, want one string key", typ)
	}
	if n := rdb.Exists(ctx, body).Val(); n != 0 {
		t.Error("the earlier release's body key is still there after the call was rewritten")
	}
	if d := rdb.PTTL(ctx, key).Val(); d <= 0 || d > ttl {
		t.Errorf("the rewritten call's TTL is %v, want its earlier one (%v) kept", d, ttl)
	}

	swept, err := s.Approved(ctx, 0, 10)
	if err != nil || len(swept) != 1 || swept[0].ID != c.ID || swept[0].Upstream != c.Upstream {
		t.Fatalf("Approved = %+v, %v; want the call", swept, err)
	}
	claimed, err := s.Claim(ctx, c.ID, time.Minute)
	if err != nil || string(claimed.Request) != string(c.Request) {
		t.Fatalf("Claim = %q, %v; want the call with its request", claimed.Request, err)
	}
	res := Result{Status: 201, Body: []byte("made"), Header: map[string][]string{"X-A": {"1"}}}
	done, err := s.Finish(ctx, c.ID, claimed.Fence, Executed, res)
	if err != nil || done.State != Executed || done.Result == nil || string(done.Result.Body) != "made" {
		t.Fatalf("Finish = %+v, %v", done, err)
	}
	if first, got, err := s.Deliver(ctx, c.ID); err != nil || !first || !got.Delivered {
		t.Fatalf("Deliver = %v, %+v, %v", first, got, err)
	}
	got := get(t, s, c.ID)
	got.Result.Header = nil
	if got.State != Executed || !got.Delivered || got.Fence != 1 || got.DecidedBy != "alice" ||
		!reflect.DeepEqual(*got.Result, Result{Status: 201, Body: []byte("made")}) || string(got.Info) != string(c.Info) {
		t.Errorf("at the end the call reads as %+v", got)
	}
}

// TestDecodeStored reads a call's key as the scripts write it (short,
// 8-bit and 16-bit string lengths in the header), and refuses a damaged
// one (every truncation of its header) without panicking.
func TestDecodeStored(t *testing.T) {
	long, longer := strings.Repeat("d", 64), strings.Repeat("e", 300)
	hd := "\x83" + "\xa2cm" + "\xa6a:b\ncd" + "\xa2ag\xd9\x40" + long + "\xa2rh\xda\x01\x2c" + longer
	line := "waiting " + strconv.Itoa(len(hd)) + " 3 0 2 0\n"
	v := line + hd + "abcxy"
	got := map[string]string{}
	if err := decodeStored(v, func(f, v string) bool { got[f] = v; return true }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"st": "waiting", "cm": "a:b\ncd", "ag": long, "rh": longer, "bf": "abc", "rq": "xy"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodeStored = %v, want %v", got, want)
	}
	// The state and the header's strings do not point into the reply: a
	// call kept from it would keep the whole reply (its request) alive.
	start, end := uintptr(unsafe.Pointer(unsafe.StringData(v))), uintptr(unsafe.Pointer(unsafe.StringData(v)))+uintptr(len(v))
	_ = decodeStored(v, func(f, val string) bool {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(val))); val != "" && p >= start && p < end && f != "bf" && f != "rq" {
			t.Errorf("field %s points into the reply", f)
		}
		return true
	})
	if st, ok := storedState(v[:20]); !ok || st != Waiting {
		t.Errorf("storedState of the key's start = %q, %v; want waiting", st, ok)
	}
	for n := range len(line) + len(hd) {
		if err := decodeStored(v[:n], func(string, string) bool { return true }); err == nil {
			t.Errorf("decodeStored took a key cut at %d of %d", n, len(v))
		}
	}
}

// TestPackDigest: a hex digest is stored as its bytes and read back as
// it was; anything else is stored as it is.
func TestPackDigest(t *testing.T) {
	hexd := "955aac3d19896d7c1beac119c42f8cbcc29aa86fecb859c063b04f3f8ffea0c4"
	if p := packDigest(hexd); len(p) != 33 || unpackDigest(p) != hexd {
		t.Errorf("packDigest(%s) = %q (%d B), unpacks to %q", hexd, p, len(p), unpackDigest(p))
	}
	for _, d := range []string{"", "sha256:args", strings.ToUpper(hexd), hexd[:63] + "g", hexd + "0"} {
		if p := packDigest(d); p != d || unpackDigest(p) != d {
			t.Errorf("packDigest(%q) = %q, want it unchanged", d, p)
		}
	}
}
