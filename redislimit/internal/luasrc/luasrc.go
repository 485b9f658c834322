// Package luasrc holds the Lua source that every script of redislimit
// starts with, so that it is written once.
package luasrc

import _ "embed"

// Start is the start of every script: it turns on effects replication,
// sets now (µs) and ttlExtra from ARGV[1], and defines divmod, ceildiv and
// ttlMs (see start.lua). A script is Start followed by the script's own
// source, which takes its other arguments from ARGV[2] on.
//
//go:embed start.lua
var Start string

// Incarnation defines incarnation and remove, the functions of the scripts
// that record admissions and give them back (see incarnation.lua). Such a
// script is Start, then Incarnation, then its own source.
//
//go:embed incarnation.lua
var Incarnation string
