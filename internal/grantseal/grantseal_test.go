package grantseal

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// sealed is a Store over a memory store, sealing with key, whose Broken
// records why it refused a grant.
func sealed(t *testing.T, inner pending.Grants, keys ...[]byte) (pending.Grants, *[]string) {
	t.Helper()
	var broken []string
	s := New(inner, keys, func(g pending.Grant, why string) { broken = append(broken, g.ID+": "+why) })
	return s, &broken
}

func sample() pending.Grant {
	return pending.Grant{
		Subject: "key:agent-42", Upstream: "notes", Tool: "notes.delete", Target: "/notes/42",
		Extras: "3f1c0de5a7b24e09", Approver: "alice", CallID: "call-1", Comment: "fine for today",
	}
}

func query(g pending.Grant) pending.GrantQuery {
	return pending.GrantQuery{Subject: g.Subject, Upstream: g.Upstream, Tool: g.Tool, Target: g.Target, SoleTarget: true}
}

// TestSealedGrantCovers: a grant made through the Store is found, sealed,
// and a rotation that keeps the old secret among the keys keeps it.
func TestSealedGrantCovers(t *testing.T) {
	mem := pending.NewMemory(pending.Options{})
	s, broken := sealed(t, mem, Key([]byte("secret one")))
	made, err := s.Grant(t.Context(), sample(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(made.Seal, "g1.") {
		t.Fatalf("stored seal %q, want a g1 seal", made.Seal)
	}
	if got, err := s.FindGrant(t.Context(), query(made)); err != nil || got.ID != made.ID {
		t.Fatalf("FindGrant = %+v, %v; want grant %s", got, err, made.ID)
	}
	if !s.(*Store).Sealed(made) {
		t.Error("Sealed(the grant made) = false")
	}
	rotated, _ := sealed(t, mem, Key([]byte("secret two")), Key([]byte("secret one")))
	if got, err := rotated.FindGrant(t.Context(), query(made)); err != nil || got.ID != made.ID {
		t.Errorf("after rotation, FindGrant = %+v, %v; want grant %s", got, err, made.ID)
	}
	if len(*broken) != 0 {
		t.Errorf("broken: %q", *broken)
	}
}

// TestForgedGrantIgnored: a grant the store holds but toolgate did not
// seal as it stands covers nothing: written without a seal, with a seal
// from another secret, with any sealed field changed, or past its sealed
// end. FindGrant answers ErrNotFound, as for no grant, and Broken says why.
func TestForgedGrantIgnored(t *testing.T) {
	key := Key([]byte("secret one"))
	for _, tt := range []struct {
		name   string
		forge  func(g *pending.Grant)
		reason string
	}{
		{"no seal", func(g *pending.Grant) { g.Seal = "" }, "no seal"},
		{"malformed", func(g *pending.Grant) { g.Seal = "g1.x.y" }, "malformed"},
		{"another secret", func(g *pending.Grant) { g.Seal = seal(Key([]byte("guess")), g, time.Now().Add(time.Hour)) }, "does not match"},
		{"another subject", func(g *pending.Grant) { g.Subject = "key:intruder" }, "does not match"},
		{"another upstream", func(g *pending.Grant) { g.Upstream = "deploys" }, "does not match"},
		{"another tool", func(g *pending.Grant) { g.Tool = "notes.purge" }, "does not match"},
		{"another target", func(g *pending.Grant) { g.Target = "/notes/43" }, "does not match"},
		{"any target", func(g *pending.Grant) { g.Target, g.AnyTarget = "", true }, "does not match"},
		{"other headers", func(g *pending.Grant) { g.Extras = "" }, "does not match"},
		{"another approver", func(g *pending.Grant) { g.Approver = "root" }, "does not match"},
		{"another call", func(g *pending.Grant) { g.CallID = "call-2" }, "does not match"},
		{"another ID", func(g *pending.Grant) { g.ID = pending.NewGrantID() }, "does not match"},
		{"later end", func(g *pending.Grant) {
			end, mac, _ := parse(g.Seal)
			g.Seal = version + "." + strconv.FormatInt(end+(24*time.Hour).Milliseconds(), 10) + "." + hex.EncodeToString(mac)
		}, "does not match"},
		{"past its end", func(g *pending.Grant) { g.Seal = seal(key, g, time.Now().Add(-time.Second)) }, "end has passed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := pending.NewMemory(pending.Options{})
			s, broken := sealed(t, mem, key)
			// What toolgate would have sealed, then changed and written
			// to the store directly, as a writer of Redis could.
			g := sample()
			g.ID = pending.NewGrantID()
			g.Seal = seal(key, &g, time.Now().Add(time.Hour))
			tt.forge(&g)
			stored, err := mem.Grant(t.Context(), g, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mem.FindGrant(t.Context(), query(stored)); err != nil {
				t.Fatalf("the store itself does not find the forged grant (%v): the test checks nothing", err)
			}
			if s.(*Store).Sealed(stored) {
				t.Error("Sealed(the forged grant) = true")
			}
			got, err := s.FindGrant(t.Context(), query(stored))
			if !errors.Is(err, pending.ErrNotFound) || got.ID != "" {
				t.Fatalf("FindGrant = %+v, %v; want ErrNotFound", got, err)
			}
			if len(*broken) != 1 || !strings.Contains((*broken)[0], tt.reason) || !strings.HasPrefix((*broken)[0], stored.ID) {
				t.Errorf("broken = %q, want one report of grant %s: %q", *broken, stored.ID, tt.reason)
			}
		})
	}
}

// TestCommentNotSealed: the comment changes nothing a grant lets through;
// editing it leaves the grant standing.
func TestCommentNotSealed(t *testing.T) {
	mem := pending.NewMemory(pending.Options{})
	key := Key([]byte("secret one"))
	s, _ := sealed(t, mem, key)
	g := sample()
	g.ID = pending.NewGrantID()
	g.Seal = seal(key, &g, time.Now().Add(time.Hour))
	g.Comment = "edited"
	stored, err := mem.Grant(t.Context(), g, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FindGrant(t.Context(), query(stored)); err != nil {
		t.Errorf("FindGrant with an edited comment: %v", err)
	}
}

func TestNewNil(t *testing.T) {
	if New(nil, [][]byte{Key(nil)}, nil) != nil {
		t.Error("New(nil) is not a nil pending.Grants: a toolgate without grants would look up grants")
	}
}

// lender is a store that answers every lookup with one grant, as a Redis
// whose scope key for another caller or tool points at a real grant does.
type lender struct{ g pending.Grant }

func (l lender) FindGrant(context.Context, pending.GrantQuery) (pending.Grant, error) {
	return l.g, nil
}

func (lender) Grant(context.Context, pending.Grant, time.Duration) (pending.Grant, error) {
	return pending.Grant{}, errors.New("lender makes no grants")
}

func (lender) Grants(context.Context, int) ([]pending.Grant, error) { return nil, nil }

func (lender) Revoke(context.Context, string) (pending.Grant, error) {
	return pending.Grant{}, pending.ErrNotFound
}

// TestGrantLentToAnotherScope: a real, rightly sealed grant that the store
// returns for a call it does not cover (another caller, upstream, tool or
// target, or a call with other targets for a grant of one target) covers
// nothing; for the calls it covers it stands.
func TestGrantLentToAnotherScope(t *testing.T) {
	key := Key([]byte("secret one"))
	maker := New(pending.NewMemory(pending.Options{}), [][]byte{key}, nil)
	exact, err := maker.Grant(t.Context(), sample(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	anyT := sample()
	anyT.Target, anyT.AnyTarget = "", true
	anyTarget, err := maker.Grant(t.Context(), anyT, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	q := query(exact)
	for _, tt := range []struct {
		name  string
		g     pending.Grant
		q     func(*pending.GrantQuery)
		holds bool
	}{
		{"its own call", exact, func(*pending.GrantQuery) {}, true},
		{"another caller", exact, func(q *pending.GrantQuery) { q.Subject = "key:agent-7" }, false},
		{"another upstream", exact, func(q *pending.GrantQuery) { q.Upstream = "deploys" }, false},
		{"another tool", exact, func(q *pending.GrantQuery) { q.Tool = "notes.purge" }, false},
		{"another target", exact, func(q *pending.GrantQuery) { q.Target = "/notes/43" }, false},
		{"other targets as well", exact, func(q *pending.GrantQuery) { q.SoleTarget = false }, false},
		{"any target: another target", anyTarget, func(q *pending.GrantQuery) { q.Target = "/notes/43" }, true},
		{"any target: other targets as well", anyTarget, func(q *pending.GrantQuery) { q.SoleTarget = false }, true},
		{"any target: another tool", anyTarget, func(q *pending.GrantQuery) { q.Tool = "notes.purge" }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var broken []string
			s := New(lender{g: tt.g}, [][]byte{key}, func(g pending.Grant, why string) { broken = append(broken, why) })
			qq := q
			tt.q(&qq)
			got, err := s.FindGrant(t.Context(), qq)
			if tt.holds {
				if err != nil || got.ID != tt.g.ID || len(broken) != 0 {
					t.Errorf("FindGrant = %+v, %v (broken %q); want grant %s", got, err, broken, tt.g.ID)
				}
				return
			}
			if !errors.Is(err, pending.ErrNotFound) || len(broken) != 1 || !strings.Contains(broken[0], "scope it does not cover") {
				t.Errorf("FindGrant = %+v, %v (broken %q); want ErrNotFound, reported", got, err, broken)
			}
		})
	}
}

// TestNoKeys: a Store given no keys seals with a key of its own, and
// believes what it made.
func TestNoKeys(t *testing.T) {
	s := New(pending.NewMemory(pending.Options{}), nil, nil)
	made, err := s.Grant(t.Context(), sample(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.FindGrant(t.Context(), query(made)); err != nil || got.ID != made.ID {
		t.Errorf("FindGrant = %+v, %v; want grant %s", got, err, made.ID)
	}
}
