package config

import (
	_ "embed"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Load reads the configuration at path: a file, or every *.yaml and *.yml
// file of a directory (not its subdirectories, nor files whose names
// start with a dot), in name order. A domain may be in one file only,
// unless MergeDomains is given. It returns every error of every file,
// each an *ErrConfig, joined.
func Load(path string, opts ...LoadOption) (*Config, error) {
	files, err := readFiles(path)
	if err != nil {
		return nil, err
	}
	return build(files, newLoadOptions(opts))
}

// A LoadOption changes how Load and a Watcher read a directory.
type LoadOption func(*loadOptions)

type loadOptions struct{ merge bool }

func newLoadOptions(opts []LoadOption) loadOptions {
	var o loadOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// MergeDomains lets several files (or YAML documents) hold one domain,
// as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does: their rules are
// the domain's, as if one file held them all, in the order of the
// files. A rule given twice at one level (the same key and value under
// the same parent), in two files or in one, is an error naming both
// places, and so is a replaces naming no rate_limit of the domain in any
// of its files. A limit's Name does not depend on the file it is in, so
// a rule moved from one file to another keeps its state.
func MergeDomains() LoadOption { return func(o *loadOptions) { o.merge = true } }

// File is one configuration file, by name and content, for ParseFiles.
type File struct {
	Name string // in errors and in Limit.File
	Data []byte
}

// ParseFiles reads files as Load reads the files of a directory, in the
// order given: a domain may be in one of them only (unless MergeDomains
// is given), and every error of every file is returned, joined. No file
// is an empty configuration, without domains. It is for configurations
// that do not come from the file system, such as hotlimitd/xds's.
func ParseFiles(files []File, opts ...LoadOption) (*Config, error) {
	src := make([]source, len(files))
	for i, f := range files {
		src[i] = source{f.Name, f.Data}
	}
	return build(src, newLoadOptions(opts))
}

// source is one file's name and content.
type source struct {
	name string
	data []byte
}

// readFiles reads path as Load does.
func readFiles(path string) ([]source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return []source{{path, data}}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []source
	for _, e := range ents { // ReadDir sorts by name
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		full := filepath.Join(path, name)
		fi, err := os.Stat(full) // follows the symlinks of a Kubernetes ConfigMap
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, err
		}
		files = append(files, source{full, data})
	}
	if len(files) == 0 {
		return nil, &ErrConfig{File: path, Msg: "no *.yaml or *.yml file in the directory"}
	}
	return files, nil
}

// build parses files into one Config.
func build(files []source, o loadOptions) (*Config, error) {
	c := &Config{domains: map[string]*domain{}}
	if o.merge {
		c.builders = map[string]*domainBuilder{}
	}
	var errs []error
	for _, f := range files {
		errs = append(errs, c.parse(f.name, f.data)...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.builders)) {
		errs = append(errs, c.builders[name].checkReplaces()...)
	}
	c.builders = nil
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

//go:embed default.yaml
var defaultYAML []byte

// DefaultFile is the name Default's limits give as their File.
const DefaultFile = "default.yaml"

// DefaultYAML returns the file Default reads, to show or to start a
// configuration from.
func DefaultYAML() []byte { return slices.Clone(defaultYAML) }

// Default returns the built-in configuration, for a server started
// without one: domain "hotlimitd", whose rules are
//
//   - generic_key: 100 per second for each value, a token bucket;
//   - remote_address: 10 per second for each value, a sliding window;
//   - remote_address then path: 60 per minute for each pair (a
//     fixed window).
//
// DefaultYAML returns the file.
func Default() *Config {
	c, err := Parse(DefaultFile, defaultYAML)
	if err != nil {
		panic("config: the built-in default.yaml is invalid: " + err.Error()) // a test parses it
	}
	return c
}
