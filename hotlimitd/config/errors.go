package config

import "strconv"

// ErrConfig is one error of a configuration file: the File, the Line (1
// for the first; 0 when the error is about the whole file), the Field (a
// path such as descriptors[1].rate_limit.unit, or "" for the file itself)
// and what is wrong. Parse and Load return every error of a file, each an
// *ErrConfig, joined with errors.Join; errors.As finds the first.
type ErrConfig struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// Error returns "file:line: field: msg", leaving out the line when it is 0
// and the field when it is "".
func (e *ErrConfig) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}
