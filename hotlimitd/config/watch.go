package config

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// A Watcher keeps the configuration at a path current: it reloads it when
// its content changes (Run polls it) or when asked (Reload, on SIGHUP).
// A load that fails keeps the running configuration. It compares
// contents, not modification times, so the atomic symlink swap of a
// Kubernetes ConfigMap is seen like any edit. Its methods are safe for
// concurrent use; loads run one at a time.
type Watcher struct {
	path     string
	opts     loadOptions
	interval time.Duration
	onReload func(*Config)
	onError  func(error)
	cur      atomic.Pointer[Config]

	mu      sync.Mutex // serializes loads; guards seen and lastErr
	seen    [sha256.Size]byte
	lastErr string // the read error poll reported last, "" after a load
}

// NewWatcher loads path (a file or a directory, as Load) and returns a
// Watcher over it, or the error if that first load fails. After each
// later load that succeeds, onReload is called with the new Config (by
// then Current); after each that fails, onError with the error, and
// Current stays. Either may be nil. They are called one at a time, from
// Run or Reload's goroutine, while the Watcher holds its lock: they must
// not call Reload. opts apply to every load.
func NewWatcher(path string, interval time.Duration, onReload func(*Config), onError func(error), opts ...LoadOption) (*Watcher, error) {
	if interval <= 0 {
		return nil, errors.New("config: NewWatcher: interval must be > 0, got " + interval.String())
	}
	files, err := readFiles(path)
	if err != nil {
		return nil, err
	}
	o := newLoadOptions(opts)
	c, err := build(files, o)
	if err != nil {
		return nil, err
	}
	w := &Watcher{path: path, opts: o, interval: interval, onReload: onReload, onError: onError, seen: digest(files)}
	w.cur.Store(c)
	return w, nil
}

// Current returns the running configuration.
func (w *Watcher) Current() *Config { return w.cur.Load() }

// Reload loads the path now, changed or not, and returns the error if it
// fails (Current then stays, and onError is not called: the caller has
// the error). On success it calls onReload.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	files, err := readFiles(w.path)
	if err != nil {
		return err
	}
	return w.loadLocked(files)
}

// Run polls the path every interval until ctx is done, loading it when
// its content differs from the last content loaded or tried, or when it
// could not be read at the previous poll: a file that fails is reported
// once, not at every poll.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.poll()
		}
	}
}

// poll is one step of Run.
func (w *Watcher) poll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	files, err := readFiles(w.path)
	if err != nil {
		// A file missing for a moment (an editor's rename) is reported
		// once, not at every poll.
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.report(err)
		}
		// Loaded again once it can be read, changed or not: whoever
		// counted the failure sees it loaded.
		w.seen = [sha256.Size]byte{}
		return
	}
	w.lastErr = ""
	if digest(files) == w.seen {
		return
	}
	if err := w.loadLocked(files); err != nil {
		w.report(err)
	}
}

// loadLocked builds files and, if they are valid, makes them current.
// It requires w.mu.
func (w *Watcher) loadLocked(files []source) error {
	w.seen = digest(files)
	c, err := build(files, w.opts)
	if err != nil {
		return err
	}
	w.cur.Store(c)
	if w.onReload != nil {
		w.onReload(c)
	}
	return nil
}

func (w *Watcher) report(err error) {
	if w.onError != nil {
		w.onError(err)
	}
}

// digest hashes the names and contents of files.
func digest(files []source) [sha256.Size]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range files {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(f.name))))
		h.Write([]byte(f.name))
		h.Write(binary.AppendUvarint(n[:0], uint64(len(f.data))))
		h.Write(f.data)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
