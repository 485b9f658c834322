package ident

import (
	"strings"
	"testing"
)

// TestAppendIDPlainBytes: an ID of one byte is used as is exactly when
// the byte is a letter, a digit or one of "._@+-", and hashed otherwise.
func TestAppendIDPlainBytes(t *testing.T) {
	const plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@+-"
	for c := range 256 {
		id := string([]byte{byte(c)})
		got := string(AppendID([]byte("k:"), id))
		if want := strings.IndexByte(plain, byte(c)) >= 0; want != (got == "k:"+id) || !want && (!strings.HasPrefix(got, "k:~") || len(got) != 3+32) {
			t.Errorf("byte %#x: %q, plain %v", c, got, want)
		}
	}
	if got := string(AppendID(nil, strings.Repeat("a", 129))); !strings.HasPrefix(got, "~") {
		t.Errorf("129 bytes: %q, want hashed", got)
	}
	if got := string(AppendID(nil, strings.Repeat("a", 128))); got != strings.Repeat("a", 128) {
		t.Errorf("128 bytes: %q, want as is", got)
	}
}
