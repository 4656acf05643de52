package policy

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the engine whenever a file of the policy changes, until ctx
// ends. dirs are the policy directory and the rules file's directory, as the
// configuration gives them: the rules file's directory is listed for the
// rules file alone, and counts as a policy directory only when it is listed
// twice (it is policy.dir too) or lies inside another listed directory.
//
// Only the policy's own files trigger a reload: under a policy directory the
// .rego modules and .json, .yaml and .yml data files the engine loads
// (not _test.rego, not hidden ones) and its subdirectories, and the rules
// file itself; a log or an editor's swap file written beside them does not,
// so a failed reload is retried only when the policy changes again.
// Kubernetes' ConfigMap swap (a new "..data" symlink) counts in both kinds
// of directory. Events are debounced (an editor's save is several events),
// and directories are watched rather than files, so atomic renames and
// symlink swaps are seen. A policy directory replaced whole (a symlink to a
// release repointed, a new directory renamed over it) is seen from its
// parent, which is watched too: its watches then follow the new one. A
// reload that fails keeps the last good policy (see Reload).
func (e *Engine) Watch(ctx context.Context, dirs []string, debounce time.Duration) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	f := newWatchFilter(dirs, e.opts.RulesFile)
	watched := map[string]bool{}
	var wanted map[string]bool // what the sync under way watches
	add := func(p string) {
		if wanted != nil {
			wanted[p] = true
		}
		if watched[p] {
			return
		}
		if err := w.Add(p); err != nil {
			e.opts.Logger.Warn("cannot watch policy directory", "dir", p, "error", err)
			return
		}
		watched[p] = true
	}
	// replaced maps each path whose change replaces a policy directory
	// (the root, each symlink it resolves through, the directory it ends
	// in) to that root; their parents are watched.
	replaced := map[string]string{}
	// linkDirs are the directories watched for the rules file's links:
	// those a repointed link no longer goes through are let go.
	linkDirs := map[string]bool{}
	sync := func() {
		wanted = map[string]bool{}
		defer func() { wanted = nil }()
		for _, root := range f.policyRoots {
			for _, p := range linkChain(root) {
				replaced[p] = root
				add(filepath.Dir(p))
			}
			// A root that is a symlink is walked where it points (WalkDir
			// would not), its directories watched under the root's name:
			// events then name files as the filter knows them.
			real, err := filepath.EvalSymlinks(root)
			if err != nil {
				continue
			}
			_ = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
				if rel, rerr := filepath.Rel(real, p); err == nil && rerr == nil && d.IsDir() {
					add(filepath.Join(root, rel))
				}
				return nil
			})
		}
		if f.rulesDir != "" {
			add(f.rulesDir)
			// A rules file that is a symlink (to a checkout elsewhere) is
			// edited where it points: each file on its way is watched in
			// its own directory, again after every reload, as a link may
			// have been repointed.
			f.rulesLinks = map[string]bool{}
			now := map[string]bool{}
			for _, p := range linksOn(f.rulesFile) {
				f.rulesLinks[p] = true
				now[filepath.Dir(p)] = true
				add(filepath.Dir(p))
			}
			for d := range linkDirs {
				if !wanted[d] && watched[d] {
					_ = w.Remove(d)
					delete(watched, d)
				}
			}
			linkDirs = now
		}
	}
	sync()
	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Clean(ev.Name)
			if root, ok := replaced[name]; ok && ev.Op != fsnotify.Chmod {
				// The directory itself, or a link on the way to it, seen
				// from its parent: replaced, the root's watches are on the
				// one it replaced. Dropped here, they are added again on
				// the new one before the reload.
				for p := range watched {
					if p == root || strings.HasPrefix(p, root+string(filepath.Separator)) {
						_ = w.Remove(p)
						delete(watched, p)
					}
				}
				timer.Reset(debounce)
				continue
			}
			wasDir := watched[name]
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				delete(watched, name)
			}
			if ev.Op == fsnotify.Chmod || !f.counts(name, wasDir) {
				continue
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// Events may have been lost (an overflow): reload to be sure.
			e.opts.Logger.Warn("policy watcher error", "error", err)
			timer.Reset(debounce)
		case <-timer.C:
			sync()
			_ = e.Reload(ctx) // logged and reported by Reload
		}
	}
}

// linkChain is root, each symlink it resolves through one step at a time
// (a link to a link to a release), and the path it ends in: a change to
// any of them replaces the directory the root names. At most 40 steps, as
// the kernel follows.
func linkChain(root string) []string {
	chain := []string{root}
	p := root
	for range 40 {
		target, err := os.Readlink(p)
		if err != nil {
			break // not a link (or gone): the end of the chain
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
		chain = append(chain, p)
	}
	return chain
}

// linksOn returns the symlinks that resolving p goes through, in any of
// its components (rules.yaml -> /srv/current/rules.yaml, where current ->
// releases/v1), and the path it ends in, when that is not p: a change to
// any of them changes the file p names. At most 40 links, as the kernel
// follows.
func linksOn(p string) []string {
	var out []string
	p = filepath.Clean(p)
	start := p
	for range 40 {
		link, rest, ok := firstLink(p)
		if !ok {
			break
		}
		target, err := os.Readlink(link)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(link), target)
		}
		out = append(out, link)
		p = filepath.Clean(filepath.Join(target, rest))
	}
	if p != start {
		out = append(out, p)
	}
	return out
}

// firstLink returns the first component of p, from its root, that is a
// symlink, and what of p follows it.
func firstLink(p string) (link, rest string, ok bool) {
	parts := strings.Split(p, string(filepath.Separator))
	cur := ""
	for i, part := range parts {
		if i == 0 && part == "" {
			cur = string(filepath.Separator)
			continue
		}
		cur = filepath.Join(cur, part)
		if st, err := os.Lstat(cur); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return cur, filepath.Join(parts[i+1:]...), true
		}
	}
	return "", "", false
}

// watchFilter tells a policy file's events from other files' events.
type watchFilter struct {
	policyRoots []string // the policy directories, cleaned
	rulesFile   string   // cleaned; "" without one
	rulesDir    string   // the rules file's directory; "" without a rules file
	// rulesLinks are the paths the rules file resolves through, one
	// symlink at a time, and the file it ends in (not itself): Watch's
	// sync sets them.
	rulesLinks map[string]bool
}

func newWatchFilter(dirs []string, rulesFile string) *watchFilter {
	f := &watchFilter{}
	for _, d := range dirs {
		f.policyRoots = append(f.policyRoots, filepath.Clean(d))
	}
	if rulesFile != "" {
		f.rulesFile = filepath.Clean(rulesFile)
		f.rulesDir = filepath.Dir(f.rulesFile)
		// The configuration lists the rules file's directory for the rules
		// file's sake: once, not as a policy directory.
		if i := slices.Index(f.policyRoots, f.rulesDir); i >= 0 {
			f.policyRoots = slices.Delete(f.policyRoots, i, i+1)
		}
	}
	return f
}

// counts reports whether an event on path p may change the policy. wasDir
// says p was a watched directory (it may be gone by now).
func (f *watchFilter) counts(p string, wasDir bool) bool {
	if f.rulesFile != "" && (p == f.rulesFile || f.rulesLinks[p] || p == filepath.Join(f.rulesDir, "..data")) {
		return true
	}
	for _, root := range f.policyRoots {
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if rel == "..data" {
			return true // a ConfigMap's files swapped at once
		}
		if slices.ContainsFunc(strings.Split(rel, string(filepath.Separator)), func(s string) bool { return strings.HasPrefix(s, ".") }) {
			continue // hidden, as the loader skips them
		}
		if wasDir {
			return true
		}
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			return true // a directory of policy files moved in
		}
		if isPolicyFile(filepath.Base(p)) {
			return true
		}
	}
	return false
}

// isPolicyFile reports whether the loader reads a file of this name: what
// skipNonPolicy keeps.
func isPolicyFile(name string) bool {
	if strings.HasSuffix(name, "_test.rego") {
		return false
	}
	for _, ext := range []string{".rego", ".json", ".yaml", ".yml"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}
