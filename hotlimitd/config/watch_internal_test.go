package config

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func limitYAML(n int) string {
	return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + itoa(n) + "}\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rpu returns the requests_per_unit of domain d's rule k in c.
func rpu(t *testing.T, c *Config) uint32 {
	t.Helper()
	l, _, ok := c.Match(nil, "d", []Entry{{"k", "v"}})
	if !ok {
		t.Fatal("no match")
	}
	return l.RequestsPerUnit
}

// recorder records a Watcher's callbacks. Run calls them from its
// goroutine, hence the lock.
type recorder struct {
	mu      sync.Mutex
	reloads []*Config
	errs    []error
}

// counts returns how many reloads and errors r has seen.
func (r *recorder) counts() (reloads, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reloads), len(r.errs)
}

func newWatcher(t *testing.T, path string) (*Watcher, *recorder) {
	t.Helper()
	r := &recorder{}
	w, err := NewWatcher(path, time.Second,
		func(c *Config) { r.mu.Lock(); r.reloads = append(r.reloads, c); r.mu.Unlock() },
		func(err error) { r.mu.Lock(); r.errs = append(r.errs, err); r.mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	return w, r
}

func TestWatcherPoll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitYAML(1))
	w, r := newWatcher(t, path)
	if rpu(t, w.Current()) != 1 {
		t.Fatal("first load")
	}
	w.poll() // unchanged: nothing
	if len(r.reloads)+len(r.errs) != 0 {
		t.Fatalf("poll of an unchanged file: %d reloads, %v", len(r.reloads), r.errs)
	}
	write(t, path, limitYAML(2))
	w.poll()
	if len(r.reloads) != 1 || r.reloads[0] != w.Current() || rpu(t, w.Current()) != 2 {
		t.Fatalf("after a change: %d reloads, rpu %d", len(r.reloads), rpu(t, w.Current()))
	}
	// A bad file: reported once, the running config kept.
	write(t, path, limitYAML(3)+"    bogus: 1\n")
	w.poll()
	w.poll()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0].Error(), "c.yaml:5: descriptors[0].bogus: unknown field") {
		t.Fatalf("bad file: errors %v", r.errs)
	}
	if rpu(t, w.Current()) != 2 || len(r.reloads) != 1 {
		t.Fatal("a bad file replaced the running config")
	}
	// The same content written again is not a change.
	write(t, path, limitYAML(3)+"    bogus: 1\n")
	w.poll()
	if len(r.errs) != 1 {
		t.Fatalf("rewritten bad file reported again: %v", r.errs)
	}
	write(t, path, limitYAML(4))
	w.poll()
	if rpu(t, w.Current()) != 4 || len(r.reloads) != 2 {
		t.Fatal("the fixed file was not loaded")
	}
	// A missing file: reported once, kept; back: loaded.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.poll()
	w.poll()
	if len(r.errs) != 2 || rpu(t, w.Current()) != 4 {
		t.Fatalf("missing file: errors %v", r.errs)
	}
	write(t, path, limitYAML(5))
	w.poll()
	if rpu(t, w.Current()) != 5 || len(r.reloads) != 3 {
		t.Fatal("the restored file was not loaded")
	}
}

// A Kubernetes ConfigMap volume: the files are symlinks through ..data,
// which is swapped atomically to a new directory.
func TestWatcherConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, n int) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "limits.yaml"), limitYAML(n))
	}
	swap := func(name string) {
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", 1)
	swap("..v1")
	if err := os.Symlink(filepath.Join("..data", "limits.yaml"), filepath.Join(dir, "limits.yaml")); err != nil {
		t.Fatal(err)
	}
	w, r := newWatcher(t, dir)
	f, rf := newWatcher(t, filepath.Join(dir, "limits.yaml")) // the file, through its link
	if rpu(t, w.Current()) != 1 || rpu(t, f.Current()) != 1 {
		t.Fatal("first load")
	}
	version("..v2", 2)
	swap("..v2")
	w.poll()
	f.poll()
	if len(r.errs) != 0 || len(r.reloads) != 1 || rpu(t, w.Current()) != 2 {
		t.Fatalf("directory, after the swap: %d reloads, errors %v", len(r.reloads), r.errs)
	}
	if len(rf.errs) != 0 || len(rf.reloads) != 1 || rpu(t, f.Current()) != 2 {
		t.Fatalf("file, after the swap: %d reloads, errors %v", len(rf.reloads), rf.errs)
	}
}

func TestWatcherReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitYAML(1))
	w, r := newWatcher(t, path)
	if err := w.Reload(); err != nil || len(r.reloads) != 1 {
		t.Fatalf("Reload of an unchanged file: %v, %d reloads", err, len(r.reloads))
	}
	write(t, path, "domain: d\ndescriptors: 7\n")
	err := w.Reload()
	if err == nil || !strings.Contains(err.Error(), "c.yaml:2: descriptors: want a list") {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if len(r.errs) != 0 || rpu(t, w.Current()) != 1 {
		t.Fatal("Reload of a bad file called onError or replaced the config")
	}
	w.poll() // the bad content was tried by Reload: not reported again
	if len(r.errs) != 0 {
		t.Fatalf("poll after Reload: %v", r.errs)
	}
	write(t, path, limitYAML(2))
	if err := w.Reload(); err != nil || rpu(t, w.Current()) != 2 {
		t.Fatalf("Reload: %v", err)
	}
}

func TestNewWatcherErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if _, err := NewWatcher(path, time.Second, nil, nil); err == nil {
		t.Error("a missing file")
	}
	write(t, path, "domain: [\n")
	if _, err := NewWatcher(path, time.Second, nil, nil); err == nil {
		t.Error("a bad file")
	}
	write(t, path, limitYAML(1))
	if _, err := NewWatcher(path, 0, nil, nil); err == nil {
		t.Error("interval 0")
	}
	if _, err := NewWatcher(path, time.Second, nil, nil); err != nil {
		t.Errorf("nil callbacks: %v", err)
	}
}

// Run polls at its interval and returns when its context is done.
func TestWatcherRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		write(t, path, limitYAML(1))
		w, r := newWatcher(t, path)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			w.Run(ctx)
			close(done)
		}()
		write(t, path, limitYAML(2))
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if n, _ := r.counts(); n != 0 {
			t.Fatal("reloaded before the interval")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n, _ := r.counts(); n != 1 || rpu(t, w.Current()) != 2 {
			t.Fatalf("after one interval: %d reloads", n)
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return when its context was done")
		}
	})
}

// Reload, poll and Current from several goroutines (run with -race):
// every Current is one of the configurations written, whole.
func TestWatcherConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write(t, path, limitYAML(1))
	w, _ := newWatcher(t, path)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 20 {
			write(t, path+".tmp", limitYAML(1+i%9))
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Error(err)
				return
			}
			if err := w.Reload(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			w.poll()
		}
	})
	wg.Go(func() {
		for range 200 {
			l, _, ok := w.Current().Match(nil, "d", []Entry{{"k", "v"}})
			if !ok || l.RequestsPerUnit < 1 || l.RequestsPerUnit > 9 {
				t.Errorf("Current: %v %v", l, ok)
			}
		}
	})
	wg.Wait()
}
