package policy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// TestWatchIgnoresOtherFiles: with a broken policy in force, a log written
// beside the policy and beside the rules file (as a log of every failed
// reload would be) triggers no reload; the rules file and a .rego do.
func TestWatchIgnoresOtherFiles(t *testing.T) {
	dir, rulesDir := t.TempDir(), t.TempDir()
	write := func(path, src string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "p.rego"), "package toolgate\nallow if true\n")
	rules := writeRules(t, rulesDir, seedRules)
	reloaded := make(chan error, 64)
	e := newEngine(t, policy.Options{Policies: os.DirFS(dir), RulesFile: rules, OnReload: func(_ string, err error) { reloaded <- err }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.Watch(ctx, []string{dir, rulesDir}, 20*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // let the watcher start

	expectReload := func(what string) error {
		t.Helper()
		select {
		case err := <-reloaded:
			return err
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: no reload within 2s", what)
			return nil
		}
	}
	expectNone := func(what string) {
		t.Helper()
		select {
		case err := <-reloaded:
			t.Fatalf("%s: a reload (err %v)", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}

	write(filepath.Join(dir, "q.rego"), "package toolgate\nallow if {\n")
	if err := expectReload("a broken .rego"); err == nil {
		t.Fatal("a broken module reloaded without error")
	}
	expectNone("after the failed reload")
	for i := range 10 {
		for _, name := range []string{
			filepath.Join(dir, "toolgate.log"), filepath.Join(rulesDir, "toolgate.log"),
			filepath.Join(dir, ".p.rego.swp"), filepath.Join(dir, "p.rego~"), filepath.Join(dir, "p_test.rego"),
			filepath.Join(rulesDir, "other.yaml"),
		} {
			write(name, fmt.Sprintf("line %d: policy reload failed\n", i))
		}
		time.Sleep(10 * time.Millisecond)
	}
	expectNone("logs and swap files written")

	write(filepath.Join(dir, "q.rego"), "package toolgate\ndeny contains \"frozen\" if true\n")
	if err := expectReload("a good .rego"); err != nil {
		t.Fatal(err)
	}
	if got := decide(t, e, call("Read", "x")); got.Action != "deny" {
		t.Fatalf("after a good write: %v, want deny", got)
	}
	writeRules(t, rulesDir, seedRules[:1])
	if err := expectReload("the rules file"); err != nil {
		t.Fatal(err)
	}
}

func TestWatchCounts(t *testing.T) {
	pol, rules := filepath.FromSlash("/srv/policy"), filepath.FromSlash("/srv/conf/rules.yaml")
	j := func(parts ...string) string { return filepath.Join(parts...) }
	cases := []struct {
		dirs  []string
		rules string
		path  string
		want  bool
	}{
		{[]string{pol}, "", j(pol, "p.rego"), true},
		{[]string{pol}, "", j(pol, "sub", "data.json"), true},
		{[]string{pol}, "", j(pol, "d.yaml"), true},
		{[]string{pol}, "", j(pol, "d.yml"), true},
		{[]string{pol}, "", j(pol, "..data"), true},
		{[]string{pol}, "", j(pol, "p_test.rego"), false},
		{[]string{pol}, "", j(pol, "toolgate.log"), false},
		{[]string{pol}, "", j(pol, ".p.rego.swp"), false},
		{[]string{pol}, "", j(pol, "4913"), false},
		{[]string{pol}, "", j(pol, ".git", "x.json"), false},
		{[]string{pol}, "", j(pol, "..2026_12_01", "p.rego"), false},
		{[]string{pol}, "", j(pol, "..", "other.rego"), false},
		{[]string{pol, filepath.Dir(rules)}, rules, rules, true},
		{[]string{pol, filepath.Dir(rules)}, rules, j(filepath.Dir(rules), "..data"), true},
		{[]string{pol, filepath.Dir(rules)}, rules, j(filepath.Dir(rules), "toolgate.yaml"), false},
		{[]string{pol, filepath.Dir(rules)}, rules, j(filepath.Dir(rules), "toolgate.log"), false},
		{[]string{pol, filepath.Dir(rules)}, rules, j(pol, "p.rego"), true},
		// the rules file beside the policy: policy.dir and its directory
		{[]string{pol, pol}, j(pol, "rules.yaml"), j(pol, "d.json"), true},
		{[]string{pol, pol}, j(pol, "rules.yaml"), j(pol, "x.log"), false},
		// a rules file without policy.dir: its siblings are not policy
		{[]string{filepath.Dir(rules)}, rules, j(filepath.Dir(rules), "d.json"), false},
	}
	for _, tc := range cases {
		if got := policy.WatchCounts(tc.dirs, tc.rules, tc.path); got != tc.want {
			t.Errorf("dirs %v rules %q: event on %s counts = %v, want %v", tc.dirs, tc.rules, tc.path, got, tc.want)
		}
	}
}

// TestWatchDirectoryReplaced: a policy directory replaced whole, as
// deployments do (a symlink to a release repointed with ln -sfn, or a new
// directory renamed over the old one), is reloaded, and so are later edits
// in the new one: its watches follow it rather than the one it replaced.
func TestWatchDirectoryReplaced(t *testing.T) {
	const allowX = "package toolgate\n\nallow if input.tool.name == \"x\"\n"
	const denyX = "package toolgate\n\ndeny if input.tool.name == \"x\"\n"
	write := func(t *testing.T, dir, src string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// watch starts watching dir and returns a wait for the policy in
	// force to decide the call x as want, after a reload.
	watch := func(t *testing.T, dir string) func(want policy.Action, after string) {
		t.Helper()
		reloaded := make(chan error, 64)
		e := newEngine(t, policy.Options{Policies: os.DirFS(dir), OnReload: func(_ string, err error) { reloaded <- err }})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- e.Watch(ctx, []string{dir}, 20*time.Millisecond) }()
		t.Cleanup(func() { cancel(); <-done })
		time.Sleep(100 * time.Millisecond) // let the watcher start
		return func(want policy.Action, after string) {
			t.Helper()
			deadline := time.After(5 * time.Second)
			for {
				select {
				case err := <-reloaded:
					if err != nil {
						t.Fatalf("%s: reload: %v", after, err)
					}
				case <-deadline:
					t.Fatalf("%s: the policy in force still does not %v the call, 5 s on", after, want)
				}
				d, err := e.Decide(t.Context(), &policy.Input{Kind: policy.KindREST, Tool: policy.NewTool("x", map[string]any{}, nil)})
				if err == nil && d.Action == want {
					return
				}
			}
		}
	}
	// repoint points link at target at once, as ln -sfn does.
	repoint := func(t *testing.T, link, target string) {
		t.Helper()
		if err := os.Symlink(target, link+".tmp"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(link+".tmp", link); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("symlink repointed", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "v1"), allowX)
		cur := filepath.Join(root, "current")
		if err := os.Symlink("v1", cur); err != nil {
			t.Fatal(err)
		}
		waitFor := watch(t, cur)
		write(t, filepath.Join(root, "v2"), denyX)
		repoint(t, cur, "v2")
		waitFor(policy.Deny, "the link repointed to v2")
		write(t, filepath.Join(root, "v2"), allowX)
		waitFor(policy.Allow, "an edit in v2")
	})
	t.Run("a link to a link repointed", func(t *testing.T) {
		// policy.dir -> releases/current -> v1; releases/current repointed.
		root := t.TempDir()
		rel := filepath.Join(root, "releases")
		write(t, filepath.Join(rel, "v1"), allowX)
		if err := os.Symlink("v1", filepath.Join(rel, "current")); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "policy")
		if err := os.Symlink(filepath.Join(rel, "current"), dir); err != nil {
			t.Fatal(err)
		}
		waitFor := watch(t, dir)
		write(t, filepath.Join(rel, "v2"), denyX)
		cur := filepath.Join(rel, "current")
		repoint(t, cur, "v2")
		waitFor(policy.Deny, "the second link repointed to v2")
		write(t, filepath.Join(rel, "v2"), allowX)
		waitFor(policy.Allow, "an edit in v2")
	})
	t.Run("renamed over", func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "policy")
		write(t, dir, allowX)
		waitFor := watch(t, dir)
		write(t, dir+".new", denyX)
		if err := os.Rename(dir, dir+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir+".new", dir); err != nil {
			t.Fatal(err)
		}
		waitFor(policy.Deny, "a new directory renamed over the old")
		write(t, dir, allowX)
		waitFor(policy.Allow, "an edit in the new directory")
	})
}

// watchRulesLink watches the policy whose rules file is link, in cfgDir,
// and returns a wait for delete_file to be decided want (after says what
// changed, for the failure).
func watchRulesLink(t *testing.T, link, cfgDir string) func(want, after string) {
	t.Helper()
	e := newEngine(t, policy.Options{RulesFile: link})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.Watch(ctx, []string{cfgDir}, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond) // let the watcher start
	return func(want, after string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if decide(t, e, call("delete_file", "x")).Action == want {
				return
			}
		}
		t.Fatalf("%s: delete_file is not %s 5 s on", after, want)
	}
}

// TestWatchSymlinkedRulesFile: a rules file that is a symlink to a table
// kept elsewhere (a checkout) is reloaded when the table is edited where
// it lives, and again when the link is repointed to another table and that
// one is edited.
func TestWatchSymlinkedRulesFile(t *testing.T) {
	cfgDir, realDir, otherDir := t.TempDir(), t.TempDir(), t.TempDir()
	allowAll := `{id: all, effect: allow, tool: "*", target: "*"}`
	denyDelete := `{id: no-delete, effect: deny, tool: delete_file, target: "*"}`
	real := writeRules(t, realDir, []string{allowAll})
	link := filepath.Join(cfgDir, "rules.yaml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	waitFor := watchRulesLink(t, link, cfgDir)
	writeRules(t, realDir, []string{allowAll, denyDelete})
	waitFor("deny", "the table edited where the link points")
	other := writeRules(t, otherDir, []string{allowAll})
	if err := os.Symlink(other, link+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".tmp", link); err != nil {
		t.Fatal(err)
	}
	waitFor("allow", "the link repointed")
	writeRules(t, otherDir, []string{allowAll, denyDelete})
	waitFor("deny", "the other table edited")
}

// TestWatchRulesLinkThroughDirectoryLink: a rules file that is a symlink
// into a release reached through a directory symlink (current ->
// releases/v1, as a deploy tool lays it out) reloads when the table is
// edited there and when current is repointed to another release.
func TestWatchRulesLinkThroughDirectoryLink(t *testing.T) {
	cfgDir, srv := t.TempDir(), t.TempDir()
	allowAll := `{id: all, effect: allow, tool: "*", target: "*"}`
	denyDelete := `{id: no-delete, effect: deny, tool: delete_file, target: "*"}`
	v1, v2 := filepath.Join(srv, "releases", "v1"), filepath.Join(srv, "releases", "v2")
	for _, d := range []string{v1, v2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeRules(t, v1, []string{allowAll})
	current := filepath.Join(srv, "current")
	if err := os.Symlink(v1, current); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(cfgDir, "rules.yaml")
	if err := os.Symlink(filepath.Join(current, "rules.yaml"), link); err != nil {
		t.Fatal(err)
	}
	waitFor := watchRulesLink(t, link, cfgDir)
	writeRules(t, v1, []string{allowAll, denyDelete})
	waitFor("deny", "edited in v1") // holds: v1 is watched through current
	writeRules(t, v2, []string{allowAll})
	if err := os.Symlink(v2, current+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(current+".tmp", current); err != nil { // ln -sfn
		t.Fatal(err)
	}
	waitFor("allow", "current repointed to v2")
}

// inotifyWatches counts this process's inotify watches.
func inotifyWatches(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err) // Linux: toolgate's watcher is inotify there
	}
	n := 0
	for _, ent := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + ent.Name())
		if l != "anon_inode:inotify" {
			continue
		}
		b, _ := os.ReadFile("/proc/self/fdinfo/" + ent.Name())
		n += strings.Count(string(b), "inotify wd:")
	}
	return n
}

// TestWatchRepointLetsGo: each repoint of a symlinked rules file to a
// table in another directory (a release per deploy, old ones kept) adds a
// watch on the new directory and never drops the old one: watches (and
// events from old releases' directories) grow with every deploy.
func TestWatchRepointLetsGo(t *testing.T) {
	cfgDir := t.TempDir()
	allowAll := `{id: all, effect: allow, tool: "*", target: "*"}`
	first := writeRules(t, t.TempDir(), []string{allowAll})
	link := filepath.Join(cfgDir, "rules.yaml")
	if err := os.Symlink(first, link); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, policy.Options{RulesFile: link})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.Watch(ctx, []string{cfgDir}, 10*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond)
	before := inotifyWatches(t)
	for i := range 20 {
		rel := writeRules(t, t.TempDir(), []string{allowAll, fmt.Sprintf(`{id: r%d, effect: deny, tool: t%d, target: "*"}`, i, i)})
		_ = os.Symlink(rel, link+".tmp")
		if err := os.Rename(link+".tmp", link); err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
	}
	after := inotifyWatches(t)
	t.Logf("inotify watches: %d before 20 repoints, %d after", before, after)
	if after > before+1 {
		t.Errorf("watches grew from %d to %d over 20 repoints: old releases' directories stay watched", before, after)
	}
}
