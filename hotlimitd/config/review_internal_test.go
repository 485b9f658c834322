package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWatcherPollUnreadableThenSame: a file that could not be read at a
// poll (gone for a moment: an editor's delete and write, a directory
// read between a rename and the next) is loaded again once it can be,
// even with the content it had, so that whoever counted the failed read
// (cmd/hotlimitd's hotlimitd_config_last_reload_successful) sees the
// configuration loaded again, rather than a failure for good.
func TestWatcherPollUnreadableThenSame(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitYAML(1))
	w, r := newWatcher(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.poll()
	if reloads, errs := r.counts(); reloads != 0 || errs != 1 {
		t.Fatalf("missing file: %d reloads, %d errors", reloads, errs)
	}
	write(t, path, limitYAML(1)) // the same content back
	w.poll()
	if reloads, errs := r.counts(); reloads != 1 || errs != 1 || rpu(t, w.Current()) != 1 {
		t.Fatalf("the file back, unchanged: %d reloads, %d errors; want it loaded again", reloads, errs)
	}
	w.poll() // and then unchanged: nothing
	if reloads, errs := r.counts(); reloads != 1 || errs != 1 {
		t.Fatalf("unchanged after: %d reloads, %d errors", reloads, errs)
	}
}
