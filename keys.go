package hotlimit

import (
	"runtime"

	"github.com/hotlimit/hotlimit/internal/testhook"
)

// MaxKeyLen is the longest key a Limiter accepts. A longer key is denied
// with RetryAfter = Never and creates no state: no legitimate identity is
// that long, and accepting it would let a client spend the limiter's
// memory on key bytes. Every decision on such a key (AllowN, a peek of
// cost 0 included, Check, a layer of AllowLayers) is that denial, with
// Remaining 0, since no request on it is ever admitted, and ResetAfter 0,
// since the limiter holds no state for it that waiting would change. As
// a layer of AllowLayersState its Next is Never, as Check(key,
// 1).RetryAfter is: no unit ever comes back, where 0 would call the layer
// full.
const MaxKeyLen = 64 << 10

// lockSlot locks s.mu and returns key's live slot, with s.mu held (the
// caller unlocks). An absent key is inserted for a request of cost need >
// 0 that the policy in force under the mutex can admit (need ≤ its limit,
// which SetPolicy may have lowered since the caller read it), after
// reserving room under WithMaxKeys, with the word and at the instant
// Limiter.vacant gives for the new entry (shard.go, protocol step 1);
// otherwise it returns nil, and a request that can never pass neither
// inserts nor evicts.
func (l *Limiter) lockSlot(s *shard, h uint64, key string, now, need int64) (*slot, int64) {
	sl, now, _ := l.lockSlotFirst(s, h, key, now, need, nil)
	return sl, now
}

// lockSlotFirst is lockSlot that, when it would insert key and first is
// not nil, runs the inserter's own decision on the fresh word first: first
// maps the fresh word at the instant returned to the word after that
// decision and reports whether it admitted, and decided reports that it
// ran. An admission is published already holding it; a refusal inserts
// nothing (sl is nil), and the room reserved for the key is released:
// shard.go's protocol steps 1 and 2 (no published word is ever fresh
// before its inserter decided on it). Publishing the fresh word and
// retiring it after a refusal would leave it findable in between.
func (l *Limiter) lockSlotFirst(s *shard, h uint64, key string, now, need int64, first func(p *params, w uint64, now int64) (uint64, bool)) (sl *slot, at int64, decided bool) {
	s.mu.Lock()
	if sl := s.tab.Load().find(h, key); sl != nil || !s.admits(need) {
		return sl, now, false
	}
	for !l.tryReserveKey() {
		// Evicting takes other shards' mutexes: never while holding one.
		s.mu.Unlock()
		ok := l.reserveKey(now, h, key)
		s.mu.Lock()
		if sl := s.tab.Load().find(h, key); sl != nil || !s.admits(need) || !ok && l.kind == kindConcurrency {
			if ok {
				l.keys.Add(-1) // inserted meanwhile by someone else
				if l.onRoom != nil {
					l.onRoom()
				}
			}
			return sl, now, false
		}
		if ok {
			break
		}
		// reserveKey found key inserted by another request, and it is
		// gone again: make room again.
	}
	t := s.tab.Load()
	if nt := t.grown(key); nt != t {
		l.publish(s, nt)
		t = nt
	}
	w, now := l.vacant(t.p, now)
	if first != nil {
		var ok bool
		if w, ok = first(t.p, w, now); !ok {
			l.keys.Add(-1) // the room reserved above
			if l.onRoom != nil {
				l.onRoom()
			}
			if firstDecidedHook != nil {
				firstDecidedHook()
			}
			return nil, now, true
		}
	}
	sl = t.insert(h, key, w, s.inserted.Add(1))
	if firstDecidedHook != nil {
		firstDecidedHook()
	}
	return sl, now, first != nil
}

// firstDecidedHook, when set (by tests only), runs in lockSlotFirst after
// the inserter's first decision, with the shard's mutex held: where a
// lock-free request can find what the insertion published.
var firstDecidedHook func()

// admits reports whether a new entry of s can admit a request of cost
// need > 0 under the policy in force. Requires s.mu.
func (s *shard) admits(need int64) bool {
	return need > 0 && need <= s.tab.Load().p.limit
}

// tryReserveKey reserves room for one more key if the limiter is below
// WithMaxKeys. The caller must release it (keys.Add(-1)) if it does not
// insert.
func (l *Limiter) tryReserveKey() bool {
	if l.maxKeys == 0 {
		l.keys.Add(1)
		return true
	}
	for {
		n := l.keys.Load()
		if n >= l.maxKeys {
			return false
		}
		if l.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// reserveKey reserves room for one more key, evicting as needed. Requires
// that no shard mutex is held. A concurrency limiter evicts only fresh
// entries (no operation in flight) and gives up, reporting false, when its
// sample holds none.
func (l *Limiter) reserveKey(now int64, h uint64, key string) bool {
	for !l.tryReserveKey() {
		found, took, mine := l.evictOne(now, h, key)
		if took {
			if f := testhook.Evicted.Load(); f != nil {
				(*f)() // between the eviction and the decision on key
			}
			return true // the evicted entry's room, kept for us
		}
		if mine {
			return false // key was inserted meanwhile: the caller finds it
		}
		if l.kind == kindConcurrency {
			return found && l.tryReserveKey()
		}
		if !found {
			runtime.Gosched() // every held slot is an insertion in flight
		}
	}
	return true
}
