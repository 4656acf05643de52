package policy

import (
	"context"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the engine whenever something changes under dirs, until ctx
// ends. Events are debounced (an editor's save, or Kubernetes swapping a
// ConfigMap's "..data" symlink, is several events), and directories are
// watched rather than files, so atomic renames and symlink swaps are seen.
// A reload that fails keeps the last good policy (see Reload).
func (e *Engine) Watch(ctx context.Context, dirs []string, debounce time.Duration) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	watched := map[string]bool{}
	sync := func() {
		for _, root := range dirs {
			_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.IsDir() || watched[p] {
					return nil
				}
				if err := w.Add(p); err != nil {
					e.opts.Logger.Warn("cannot watch policy directory", "dir", p, "error", err)
					return nil
				}
				watched[p] = true
				return nil
			})
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
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				delete(watched, ev.Name)
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			e.opts.Logger.Warn("policy watcher error", "error", err)
			timer.Reset(debounce)
		case <-timer.C:
			sync()
			_ = e.Reload(ctx) // logged and reported by Reload
		}
	}
}
