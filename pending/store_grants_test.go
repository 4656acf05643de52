package pending

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testGrants checks the Grants half of the contract: a grant covers its
// scope and nothing else, an exact target before any target; it applies
// until it expires by the store's clock or is revoked, on every replica at
// once; a scope holds one grant; the store holds at most MaxGrants and
// refuses bad input.
func testGrants(t *testing.T, newStore newStoreFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		s, _ := newGrants(t, newStore)
		ctx := t.Context()
		in := sampleGrant()
		// Fields set by the store are ignored by Grant.
		in.CreatedAt, in.ExpiresAt = time.Unix(1, 0), time.Unix(2, 0)
		got, err := s.Grant(ctx, in, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want := sampleGrant()
		want.CallID = in.CallID
		want.ID = got.ID
		want.CreatedAt = time.Now()
		want.ExpiresAt = want.CreatedAt.Add(time.Minute)
		if diff := cmp.Diff(want, got, cmpopts.EquateApproxTime(slack)); diff != "" {
			t.Errorf("Grant stored (-want +got):\n%s", diff)
		}
		if d := got.ExpiresAt.Sub(got.CreatedAt); d != time.Minute {
			t.Errorf("ExpiresAt - CreatedAt = %v, want the lifetime %v", d, time.Minute)
		}
		if !validGrantID(got.ID) {
			t.Errorf("grant ID %q, want one made by the store, unguessable", got.ID)
		}
		found := findGrant(t, s, in.Subject, in.Upstream, in.Tool, in.Target)
		if diff := cmp.Diff(got, found); diff != "" {
			t.Errorf("FindGrant after Grant (-grant +found):\n%s", diff)
		}
		if diff := cmp.Diff([]Grant{got}, listGrants(t, s, 10)); diff != "" {
			t.Errorf("Grants after Grant (-grant +listed):\n%s", diff)
		}
		other := grant(t, s, sampleGrant(), time.Minute)
		if other.ID == got.ID {
			t.Errorf("two grants have the ID %s", got.ID)
		}
	})

	t.Run("CallersID", func(t *testing.T) {
		// A caller that seals what it grants names the grant first.
		s, _ := newGrants(t, newStore)
		in := sampleGrant()
		in.ID = NewGrantID()
		got := grant(t, s, in, time.Minute)
		if got.ID != in.ID {
			t.Errorf("grant ID %q, want the caller's %q", got.ID, in.ID)
		}
		if found := findGrant(t, s, in.Subject, in.Upstream, in.Tool, in.Target); found.ID != in.ID {
			t.Errorf("FindGrant found %q, want %q", found.ID, in.ID)
		}
		for _, bad := range []string{"mine", strings.ToLower(NewGrantID()), NewGrantID() + "A", "A:" + NewGrantID()[2:]} {
			in.ID = bad
			if _, err := s.Grant(t.Context(), in, time.Minute); !errors.Is(err, errInvalid) {
				t.Errorf("Grant with ID %q: %v, want it refused as invalid", bad, err)
			}
		}
	})

	t.Run("Scope", func(t *testing.T) {
		s, _ := newGrants(t, newStore)
		g := grant(t, s, sampleGrant(), long)
		if found := findGrant(t, s, g.Subject, g.Upstream, g.Tool, g.Target); found.ID != g.ID {
			t.Errorf("FindGrant(its scope) = %s, want %s", found.ID, g.ID)
		}
		for name, q := range map[string][4]string{
			"another subject":  {"key:agent-43", g.Upstream, g.Tool, g.Target},
			"another upstream": {g.Subject, "mail", g.Tool, g.Target},
			"another tool":     {g.Subject, g.Upstream, "notes.read", g.Target},
			"another target":   {g.Subject, g.Upstream, g.Tool, "/notes/43"},
			"no target":        {g.Subject, g.Upstream, g.Tool, ""},
			"target *":         {g.Subject, g.Upstream, g.Tool, "*"},
			"parts shifted":    {g.Subject + "\x00" + g.Upstream, "", g.Tool, g.Target},
		} {
			noGrantCovers(t, s, name, q)
		}

		// An exact grant for the empty target covers that target only,
		// and one for the target "*" is not a grant for any target.
		for _, target := range []string{"", "*"} {
			in := sampleGrant()
			in.Tool, in.Target = "notes.tag"+target, target
			g := grant(t, s, in, long)
			if found := findGrant(t, s, g.Subject, g.Upstream, g.Tool, target); found.ID != g.ID {
				t.Errorf("FindGrant(target %q) = %s, want %s", target, found.ID, g.ID)
			}
			noGrantCovers(t, s, fmt.Sprintf("another target than %q", target), [4]string{g.Subject, g.Upstream, g.Tool, "/x"})
		}
	})

	t.Run("AnyTarget", func(t *testing.T) {
		s, _ := newGrants(t, newStore)
		in := sampleGrant()
		in.Target, in.AnyTarget = "", true
		g := grant(t, s, in, long)
		if !g.AnyTarget || g.Target != "" {
			t.Errorf("Grant(any target) = AnyTarget %v, Target %q", g.AnyTarget, g.Target)
		}
		for _, target := range []string{"/notes/42", "/notes/43", "", "*"} {
			if found := findGrant(t, s, g.Subject, g.Upstream, g.Tool, target); found.ID != g.ID {
				t.Errorf("FindGrant(target %q) = %s, want the any-target grant %s", target, found.ID, g.ID)
			}
		}
		for name, q := range map[string][4]string{
			"another subject":  {"key:agent-43", g.Upstream, g.Tool, "/notes/42"},
			"another upstream": {g.Subject, "mail", g.Tool, "/notes/42"},
			"another tool":     {g.Subject, g.Upstream, "notes.read", "/notes/42"},
		} {
			noGrantCovers(t, s, name, q)
		}
	})

	t.Run("ExactFirst", func(t *testing.T) {
		s, _ := newGrants(t, newStore)
		ctx := t.Context()
		in := sampleGrant()
		in.Target, in.AnyTarget = "", true
		anyG := grant(t, s, in, long)
		exact := grant(t, s, sampleGrant(), long)
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, exact.Target); found.ID != exact.ID {
			t.Errorf("FindGrant(exact target) = %s, want the exact grant %s", found.ID, exact.ID)
		}
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, "/notes/7"); found.ID != anyG.ID {
			t.Errorf("FindGrant(another target) = %s, want the any-target grant %s", found.ID, anyG.ID)
		}
		if _, err := s.Revoke(ctx, exact.ID); err != nil {
			t.Fatal(err)
		}
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, exact.Target); found.ID != anyG.ID {
			t.Errorf("FindGrant(exact target) after revoking the exact grant = %s, want the any-target grant %s", found.ID, anyG.ID)
		}
	})

	t.Run("Extras", func(t *testing.T) {
		// A grant's extras are kept as given, seen by every replica and in
		// the list, and are no part of its scope: a grant for the same
		// scope with other extras (or none) replaces it, and FindGrant
		// finds a grant whatever its extras (the caller compares them).
		s, _ := newGrants(t, newStore)
		other := replicaOf(t, s)
		in := sampleGrant()
		in.Extras = "headers\x00params\x00\xff" // any bytes
		first := grant(t, s, in, long)
		if found := findGrant(t, other, in.Subject, in.Upstream, in.Tool, in.Target); found.ID != first.ID || found.Extras != in.Extras {
			t.Errorf("FindGrant on a replica = %s with extras %q, want %s with %q", found.ID, found.Extras, first.ID, in.Extras)
		}
		in.Extras = ""
		second := grant(t, s, in, long)
		found := findGrant(t, other, in.Subject, in.Upstream, in.Tool, in.Target)
		if found.ID != second.ID || found.Extras != "" {
			t.Errorf("FindGrant after a grant without extras for the same scope = %s with extras %q, want %s with none", found.ID, found.Extras, second.ID)
		}
		if got := grantIDs(listGrants(t, other, 10)); !slices.Equal(got, []string{second.ID}) {
			t.Errorf("Grants = %v, want only the replacement %s", got, second.ID)
		}
	})

	t.Run("SeveralTargets", func(t *testing.T) {
		// A call that acts on more than its target: only a grant for any
		// target covers it, and an exact grant for its target does not
		// hide that one.
		s, _ := newGrants(t, newStore)
		ctx := t.Context()
		in := sampleGrant()
		in.Target, in.AnyTarget = "", true
		anyG := grant(t, s, in, long)
		exact := grant(t, s, sampleGrant(), long)
		several := func(target string) GrantQuery {
			return GrantQuery{Subject: exact.Subject, Upstream: exact.Upstream, Tool: exact.Tool, Target: target}
		}
		for _, target := range []string{exact.Target, "/notes/7", ""} {
			if found := findGrantFor(t, s, several(target)); found.ID != anyG.ID {
				t.Errorf("FindGrant(target %q and others) = %s, want the any-target grant %s", target, found.ID, anyG.ID)
			}
		}
		// The call with its target alone still finds the exact grant.
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, exact.Target); found.ID != exact.ID {
			t.Errorf("FindGrant(exact target alone) = %s, want the exact grant %s", found.ID, exact.ID)
		}
		for name, q := range map[string]GrantQuery{
			"another subject":  {Subject: "key:agent-43", Upstream: exact.Upstream, Tool: exact.Tool, Target: exact.Target},
			"another upstream": {Subject: exact.Subject, Upstream: "mail", Tool: exact.Tool, Target: exact.Target},
			"another tool":     {Subject: exact.Subject, Upstream: exact.Upstream, Tool: "notes.read", Target: exact.Target},
		} {
			noGrantCoversQuery(t, s, name+", several targets", q)
		}

		// With the exact grant alone, a call on its target and another
		// finds none; on its target alone, the exact grant.
		if _, err := s.Revoke(ctx, anyG.ID); err != nil {
			t.Fatal(err)
		}
		noGrantCoversQuery(t, s, "the exact grant's target and another", several(exact.Target))
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, exact.Target); found.ID != exact.ID {
			t.Errorf("FindGrant(exact target alone) without an any-target grant = %s, want %s", found.ID, exact.ID)
		}
		// Nor does an exact grant for no target cover a call whose
		// targets are all in an array (it has no tool.target).
		none := sampleGrant()
		none.Target = ""
		grant(t, s, none, long)
		noGrantCoversQuery(t, s, "no target, and targets in an array", several(""))
	})

	t.Run("Expiry", func(t *testing.T) {
		s, advance := newGrants(t, newStore)
		ctx := t.Context()
		in := sampleGrant()
		in.Target, in.AnyTarget = "", true
		anyG := grant(t, s, in, long)
		exact := grant(t, s, sampleGrant(), short)
		other := sampleGrant()
		other.Tool = "notes.archive"
		gone := grant(t, s, other, short)
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, exact.Target); found.ID != exact.ID {
			t.Fatalf("FindGrant before expiry = %s, want %s", found.ID, exact.ID)
		}
		advance(beyond)
		// Unswept: the expiry alone ends the grants.
		if found := findGrant(t, s, exact.Subject, exact.Upstream, exact.Tool, exact.Target); found.ID != anyG.ID {
			t.Errorf("FindGrant past the exact grant's expiry = %s, want the any-target grant %s", found.ID, anyG.ID)
		}
		noGrantCovers(t, s, "past its expiry", [4]string{gone.Subject, gone.Upstream, gone.Tool, gone.Target})
		if got := grantIDs(listGrants(t, s, 10)); !slices.Equal(got, []string{anyG.ID}) {
			t.Errorf("Grants past expiry = %v, want only the live %s", got, anyG.ID)
		}
		for _, g := range []Grant{exact, gone} {
			if _, err := s.Revoke(ctx, g.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Revoke(expired) = %v, want ErrNotFound", err)
			}
		}
	})

	t.Run("Revoke", func(t *testing.T) {
		s, _ := newGrants(t, newStore)
		replica := replicaOf(t, s)
		ctx := t.Context()
		g := grant(t, s, sampleGrant(), long)
		kept := sampleGrant()
		kept.Tool = "notes.archive"
		kept = grant(t, s, kept, long)
		if found := findGrant(t, replica, g.Subject, g.Upstream, g.Tool, g.Target); found.ID != g.ID {
			t.Fatalf("FindGrant on a replica = %s, want %s", found.ID, g.ID)
		}
		revoked, err := replica.Revoke(ctx, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(g, revoked); diff != "" {
			t.Errorf("Revoke returned (-granted +revoked):\n%s", diff)
		}
		scope := [4]string{g.Subject, g.Upstream, g.Tool, g.Target}
		noGrantCovers(t, s, "revoked, on the granting store", scope)
		noGrantCovers(t, replica, "revoked, on the revoking store", scope)
		if got := grantIDs(listGrants(t, s, 10)); !slices.Equal(got, []string{kept.ID}) {
			t.Errorf("Grants after Revoke = %v, want only %s", got, kept.ID)
		}
		for name, id := range map[string]string{"again": g.ID, "unknown": "no-such-grant", "empty": "", "long": strings.Repeat("x", 2000)} {
			if _, err := s.Revoke(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Revoke(%s) = %v, want ErrNotFound", name, err)
			}
		}
		if found := findGrant(t, s, kept.Subject, kept.Upstream, kept.Tool, kept.Target); found.ID != kept.ID {
			t.Errorf("FindGrant(another grant) after Revoke = %s, want %s", found.ID, kept.ID)
		}
	})

	t.Run("Replace", func(t *testing.T) {
		s, advance := newGrants(t, newStore)
		ctx := t.Context()
		older := grant(t, s, sampleGrant(), long)
		newer := grant(t, s, sampleGrant(), short) // a shorter lifetime: the newer word counts
		if found := findGrant(t, s, newer.Subject, newer.Upstream, newer.Tool, newer.Target); found.ID != newer.ID {
			t.Errorf("FindGrant = %s, want the newer grant %s", found.ID, newer.ID)
		}
		if got := grantIDs(listGrants(t, s, 10)); !slices.Equal(got, []string{newer.ID}) {
			t.Errorf("Grants = %v, want only the newer %s: the older one is replaced", got, newer.ID)
		}
		if _, err := s.Revoke(ctx, older.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Revoke(replaced) = %v, want ErrNotFound", err)
		}
		advance(beyond)
		noGrantCovers(t, s, "the newer grant expired", [4]string{newer.Subject, newer.Upstream, newer.Tool, newer.Target})

		// Revoking the newer grant does not bring the older one back.
		older = grant(t, s, sampleGrant(), long)
		newer = grant(t, s, sampleGrant(), long)
		if _, err := s.Revoke(ctx, newer.ID); err != nil {
			t.Fatal(err)
		}
		noGrantCovers(t, s, "the newer grant revoked", [4]string{newer.Subject, newer.Upstream, newer.Tool, newer.Target})
	})

	t.Run("List", func(t *testing.T) {
		s, advance := newGrants(t, newStore)
		ctx := t.Context()
		var made []string
		for i := range 5 {
			in := sampleGrant()
			in.Target = fmt.Sprintf("/notes/%d", i)
			ttl := long
			if i == 1 {
				ttl = short
			}
			made = append(made, grant(t, s, in, ttl).ID)
			advance(5 * time.Millisecond) // Redis orders by the millisecond
		}
		if _, err := s.Revoke(ctx, made[3]); err != nil {
			t.Fatal(err)
		}
		advance(beyond) // made[1] expires
		want := []string{made[4], made[2], made[0]}
		if got := grantIDs(listGrants(t, s, 10)); !slices.Equal(got, want) {
			t.Errorf("Grants = %v, want %v: newest first, without the revoked and the expired", got, want)
		}
		if got := grantIDs(listGrants(t, s, 2)); !slices.Equal(got, want[:2]) {
			t.Errorf("Grants(limit 2) = %v, want %v", got, want[:2])
		}
		for _, limit := range []int{0, -1} {
			if got := listGrants(t, s, limit); len(got) != 0 {
				t.Errorf("Grants(limit %d) = %v, want none", limit, grantIDs(got))
			}
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		s, _ := newGrants(t, newStore)
		ctx := t.Context()
		long := strings.Repeat("x", MaxGrantFieldBytes+1)
		with := func(f func(*Grant)) Grant {
			g := sampleGrant()
			f(&g)
			return g
		}
		tests := map[string]struct {
			g        Grant
			lifetime time.Duration
		}{
			"no subject":          {with(func(g *Grant) { g.Subject = "" }), time.Minute},
			"no tool":             {with(func(g *Grant) { g.Tool = "" }), time.Minute},
			"any with a target":   {with(func(g *Grant) { g.AnyTarget = true }), time.Minute},
			"long subject":        {with(func(g *Grant) { g.Subject = long }), time.Minute},
			"long upstream":       {with(func(g *Grant) { g.Upstream = long }), time.Minute},
			"long tool":           {with(func(g *Grant) { g.Tool = long }), time.Minute},
			"long target":         {with(func(g *Grant) { g.Target = long }), time.Minute},
			"long approver":       {with(func(g *Grant) { g.Approver = long }), time.Minute},
			"long call ID":        {with(func(g *Grant) { g.CallID = long }), time.Minute},
			"long comment":        {with(func(g *Grant) { g.Comment = long }), time.Minute},
			"long extras":         {with(func(g *Grant) { g.Extras = long }), time.Minute},
			"NUL in subject":      {with(func(g *Grant) { g.Subject = "key:a\x00b" }), time.Minute},
			"NUL in upstream":     {with(func(g *Grant) { g.Upstream = "a\x00" }), time.Minute},
			"NUL in tool":         {with(func(g *Grant) { g.Tool = "\x00a" }), time.Minute},
			"NUL in target":       {with(func(g *Grant) { g.Target = "/a\x00" }), time.Minute},
			"lifetime 0":          {sampleGrant(), 0},
			"negative lifetime":   {sampleGrant(), -time.Minute},
			"lifetime beyond max": {sampleGrant(), MaxGrantLifetime + time.Millisecond},
		}
		for name, tt := range tests {
			if err := CheckGrant(tt.g, tt.lifetime); !errors.Is(err, errInvalid) {
				t.Errorf("CheckGrant(%s) = %v, want an invalid-argument error", name, err)
			}
			if g, err := s.Grant(ctx, tt.g, tt.lifetime); !errors.Is(err, errInvalid) {
				t.Errorf("Grant(%s) = %s, %v; want an invalid-argument error", name, g.ID, err)
			}
		}
		if got := listGrants(t, s, 10); len(got) != 0 {
			t.Errorf("refused grants were stored: %v", grantIDs(got))
		}
		// At the bounds, a grant is accepted.
		edge := sampleGrant()
		edge.Subject, edge.Comment = strings.Repeat("s", MaxGrantFieldBytes), strings.Repeat("c", MaxGrantFieldBytes)
		if err := CheckGrant(edge, MaxGrantLifetime); err != nil {
			t.Errorf("CheckGrant(at the bounds) = %v", err)
		}
		g := grant(t, s, edge, MaxGrantLifetime)
		if found := findGrant(t, s, edge.Subject, edge.Upstream, edge.Tool, edge.Target); found.ID != g.ID || found.Comment != edge.Comment {
			t.Errorf("FindGrant(at the bounds) = %s, want %s with its comment", found.ID, g.ID)
		}
		// FindGrant answers "no grant" for a call no grant could cover.
		for name, q := range map[string][4]string{
			"no subject":  {"", "notes", "notes.delete", "/x"},
			"no tool":     {"key:agent-42", "notes", "", "/x"},
			"long target": {"key:agent-42", "notes", "notes.delete", long},
			"NUL":         {"key:agent-42", "notes", "notes.delete", "/x\x00"},
		} {
			noGrantCovers(t, s, name, q)
		}
	})

	t.Run("Cap", func(t *testing.T) {
		s, advance := newGrants(t, newStore)
		ctx := t.Context()
		at := func(i int) Grant {
			g := sampleGrant()
			g.Target = fmt.Sprintf("/notes/%d", i)
			return g
		}
		// Fill the store: MaxGrants-1 grants, then one that expires soon.
		var wg sync.WaitGroup
		const workers = 16
		for w := range workers {
			wg.Go(func() {
				for i := w; i < MaxGrants-1; i += workers {
					if _, err := s.Grant(ctx, at(i), time.Minute); err != nil {
						t.Errorf("Grant %d of %d: %v", i, MaxGrants, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		grant(t, s, at(MaxGrants-1), short)
		if _, err := s.Grant(ctx, at(MaxGrants), time.Minute); !errors.Is(err, ErrTooManyGrants) {
			t.Fatalf("Grant beyond MaxGrants = %v, want ErrTooManyGrants", err)
		}
		noGrantCovers(t, s, "refused at the cap", [4]string{"key:agent-42", "notes", "notes.delete", fmt.Sprintf("/notes/%d", MaxGrants)})

		advance(beyond) // a grant that expired no longer counts, swept or not
		grant(t, s, at(MaxGrants), time.Minute)
		if _, err := s.Grant(ctx, at(MaxGrants+1), time.Minute); !errors.Is(err, ErrTooManyGrants) {
			t.Fatalf("Grant beyond MaxGrants = %v, want ErrTooManyGrants", err)
		}
		// A replacement adds no grant: allowed at the cap.
		replaced := grant(t, s, at(0), time.Minute)
		if found := findGrant(t, s, "key:agent-42", "notes", "notes.delete", "/notes/0"); found.ID != replaced.ID {
			t.Errorf("FindGrant after a replacement at the cap = %s, want %s", found.ID, replaced.ID)
		}
		if _, err := s.Revoke(ctx, replaced.ID); err != nil {
			t.Fatal(err)
		}
		grant(t, s, at(MaxGrants+1), time.Minute) // revoking made room
		if _, err := s.Grant(ctx, at(MaxGrants+2), time.Minute); !errors.Is(err, ErrTooManyGrants) {
			t.Errorf("Grant beyond MaxGrants = %v, want ErrTooManyGrants", err)
		}
		if n := len(listGrants(t, s, 2*MaxGrants)); n != MaxGrants {
			t.Errorf("Grants lists %d, want MaxGrants = %d", n, MaxGrants)
		}
	})

	t.Run("Race", func(t *testing.T) { testGrantsRace(t, newStore) })
}

// testGrantsRace: grants, revocations and look-ups of the same scopes at
// once. A look-up finds a grant of its scope or none; a scope ends with at
// most one grant, the one FindGrant finds; nothing fails.
func testGrantsRace(t *testing.T, newStore newStoreFunc) {
	const n = 16
	s, _ := newGrants(t, newStore)
	ctx := t.Context()
	exact := sampleGrant()
	anyTarget := sampleGrant()
	anyTarget.Target, anyTarget.AnyTarget = "", true
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			for round := range 20 {
				in := exact
				if (i+round)%2 == 0 {
					in = anyTarget
				}
				g, err := s.Grant(ctx, in, long)
				if err != nil {
					t.Errorf("Grant: %v", err)
					return
				}
				found, err := s.FindGrant(ctx, soleTarget([4]string{exact.Subject, exact.Upstream, exact.Tool, exact.Target}))
				switch {
				case errors.Is(err, ErrNotFound):
				case err != nil:
					t.Errorf("FindGrant: %v", err)
				case found.Subject != exact.Subject || found.Tool != exact.Tool || (!found.AnyTarget && found.Target != exact.Target):
					t.Errorf("FindGrant found %+v, outside its scope", found)
				}
				if round%3 == 0 {
					if _, err := s.Revoke(ctx, g.ID); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Revoke: %v", err) // ErrNotFound: another replaced it
					}
				}
				if _, err := s.Grants(ctx, 5); err != nil {
					t.Errorf("Grants: %v", err)
				}
			}
		})
	}
	close(start)
	wg.Wait()

	listed := listGrants(t, s, 100)
	if len(listed) > 2 {
		t.Errorf("%d grants listed for two scopes: %v", len(listed), listed)
	}
	for _, g := range listed {
		target := g.Target
		if g.AnyTarget {
			target = "/elsewhere"
		}
		found := findGrant(t, s, g.Subject, g.Upstream, g.Tool, target)
		if found.ID != g.ID {
			t.Errorf("FindGrant for the scope of listed %s = %s", g.ID, found.ID)
		}
		if _, err := s.Revoke(ctx, g.ID); err != nil {
			t.Error(err)
		}
	}
	noGrantCovers(t, s, "all revoked", [4]string{exact.Subject, exact.Upstream, exact.Tool, exact.Target})
}

// TestGrantMissError: the error of a lookup that finds nothing is
// ErrNotFound, names the call, and costs one allocation at most until its
// message is read.
func TestGrantMissError(t *testing.T) {
	q := GrantQuery{Subject: "key:agent-42", Upstream: "notes", Tool: "notes.delete", Target: "/notes/42", SoleTarget: true}
	err := noGrantFor(q)
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("noGrantFor = %v, want ErrNotFound", err)
	}
	const want = `pending: no such grant: none covers "key:agent-42" calling notes.delete on "notes" with target "/notes/42"`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { err = noGrantFor(q) }); n > 1 {
		t.Errorf("noGrantFor allocates %v times, want at most 1", n)
	}
	if got := noGrant("G1").Error(); got != "pending: no such grant: G1" {
		t.Errorf("noGrant(G1).Error() = %q", got)
	}
}

// TestRedisGrantKeys: every key of a grant is under the store's hash tag
// and has a TTL, and a retried Revoke (its reply lost) answers as the
// first did.
func TestRedisGrantKeys(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	g := grant(t, s, sampleGrant(), time.Minute)
	scope := s.grantScopeKey(grantScope(g.Subject, g.Upstream, g.Tool, g.Target, false))
	keys := []string{s.grantKey(g.ID), scope, s.grantIndex(), s.grantCreated()}
	for _, k := range keys {
		if !strings.HasPrefix(k, s.base) {
			t.Errorf("key %q is not under %s", k, s.base)
		}
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 || d > time.Minute {
			t.Errorf("PTTL %q = %v, want the grant's lifetime", k, d)
		}
	}
	if id := rdb.Get(ctx, scope).Val(); id != g.ID {
		t.Errorf("scope key holds %q, want %s", id, g.ID)
	}

	// The same Revoke twice, as go-redis retries it.
	n := nonce()
	for i := range 2 {
		v, err := s.run(ctx, revokeGrantScript, s.base, []string{s.grantKey(g.ID)}, g.ID, n, grantRevokedTTL.Milliseconds())
		if err != nil {
			t.Fatal(err)
		}
		code, got, err := grantReply(g.ID, v)
		if err != nil || code != "ok" || got.ID != g.ID || got.Subject != g.Subject {
			t.Errorf("Revoke run %d = %s %+v, %v; want ok with the grant", i+1, code, got, err)
		}
	}
	if _, err := s.Revoke(ctx, g.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another Revoke = %v, want ErrNotFound", err)
	}
	if n := rdb.Exists(ctx, keys...).Val(); n != 0 {
		t.Errorf("%d of the grant's keys are left after Revoke", n)
	}
	if d := rdb.PTTL(ctx, s.grantRevokedKey(g.ID)).Val(); d <= 0 || d > grantRevokedTTL {
		t.Errorf("PTTL of the revoked grant = %v, want at most %v", d, grantRevokedTTL)
	}
}

// newGrants returns a contract store as Grants.
func newGrants(t *testing.T, newStore newStoreFunc) (Grants, func(time.Duration)) {
	t.Helper()
	s, advance := newStore(t)
	g, ok := s.(Grants)
	if !ok {
		t.Fatalf("%T does not keep grants", s)
	}
	return g, advance
}

// replicaOf returns another store on the same data as s: for a RedisStore,
// one with its own client and the same prefix; a MemoryStore has no
// replicas, so itself.
func replicaOf(t *testing.T, s Grants) Grants {
	t.Helper()
	rs, ok := s.(*RedisStore)
	if !ok {
		return s
	}
	prefix := strings.TrimSuffix(strings.TrimPrefix(rs.base, "{"), "}:") + ":"
	// Another store on the same Redis (the same topology: standalone,
	// Sentinel or Cluster), as another replica of toolgate has.
	r, err := NewRedis(rs.rdb, Options{Prefix: prefix, Shards: len(rs.bases)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if r.base != rs.base {
		t.Fatalf("replica's key base %q, want %q", r.base, rs.base)
	}
	return r
}

// sampleGrant returns a grant with every field Grant keeps set.
func sampleGrant() Grant {
	return Grant{
		Subject:  "key:agent-42",
		Upstream: "notes",
		Tool:     "notes.delete",
		Target:   "/notes/42",
		Extras:   "3f1c0de5a7b24e09", // opaque to the store
		Approver: "alice@example.com",
		CallID:   "call-" + rand.Text(),
		Comment:  "fine for today",
		Seal:     "g1.1796500437725.9c2e", // opaque to the store
	}
}

func grant(t *testing.T, s Grants, g Grant, lifetime time.Duration) Grant {
	t.Helper()
	got, err := s.Grant(t.Context(), g, lifetime)
	if err != nil {
		t.Fatalf("Grant(%s on %s, %q) = %v", g.Tool, g.Subject, g.Target, err)
	}
	return got
}

// findGrant looks up the grant covering a call whose only target is
// target.
func findGrant(t *testing.T, s Grants, subject, upstream, tool, target string) Grant {
	t.Helper()
	return findGrantFor(t, s, soleTarget([4]string{subject, upstream, tool, target}))
}

func findGrantFor(t *testing.T, s Grants, q GrantQuery) Grant {
	t.Helper()
	g, err := s.FindGrant(t.Context(), q)
	if err != nil {
		t.Errorf("FindGrant(%+v) = %v", q, err)
	}
	return g
}

// noGrantCovers checks that no grant covers a call whose only target is
// q[3] (q: subject, upstream, tool, target).
func noGrantCovers(t *testing.T, s Grants, what string, q [4]string) {
	t.Helper()
	noGrantCoversQuery(t, s, what, soleTarget(q))
}

func noGrantCoversQuery(t *testing.T, s Grants, what string, q GrantQuery) {
	t.Helper()
	if g, err := s.FindGrant(t.Context(), q); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindGrant(%s) = %s, %v; want ErrNotFound", what, g.ID, err)
	}
}

// soleTarget is the query of a call whose only target is q[3] (q:
// subject, upstream, tool, target).
func soleTarget(q [4]string) GrantQuery {
	return GrantQuery{Subject: q[0], Upstream: q[1], Tool: q[2], Target: q[3], SoleTarget: true}
}

func listGrants(t *testing.T, s Grants, limit int) []Grant {
	t.Helper()
	gs, err := s.Grants(t.Context(), limit)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.ID == "" || g.Subject == "" || g.ExpiresAt.IsZero() {
			t.Errorf("Grants listed an incomplete grant %+v", g)
		}
	}
	return gs
}

func grantIDs(gs []Grant) []string {
	out := []string{}
	for _, g := range gs {
		out = append(out, g.ID)
	}
	return out
}
