package hotlimit

import "unsafe"

// Unsafe code: this file's string view of a byte slice, and tally.go's
// reading of a stack address as a number (never dereferenced), are the
// package's only unsafe operations. memstats.go imports unsafe for
// unsafe.Sizeof alone, a compile-time constant. TestUnsafeUses keeps this
// list true.

// AllowBytes is shorthand for AllowNBytes(key, 1).
func (l *Limiter) AllowBytes(key []byte) Decision { return l.AllowNBytes(key, 1) }

// AllowNBytes is AllowN for a key held in a byte slice, such as a header
// value. It never allocates for an existing key, whatever the key's length;
// lim.AllowN(string(b), cost) is allocation-free only for keys of at most
// 32 bytes, because the compiler's stack buffer for the conversion holds 32.
// The limiter does not retain key: it copies the bytes when it inserts a
// new key, so the caller may reuse the slice at once.
func (l *Limiter) AllowNBytes(key []byte, cost int64) Decision {
	// The string aliases key only for the duration of the call; no path
	// of AllowN stores its key argument (insert copies the bytes).
	return l.AllowN(unsafe.String(unsafe.SliceData(key), len(key)), cost)
}
