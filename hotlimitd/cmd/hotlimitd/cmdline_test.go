package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runMain, set in a test's child process, makes TestMain run the
// command's main with the arguments after "--" instead of the tests: the
// exit code a test sees is the command's.
const runMain = "HOTLIMITD_TEST_RUN_MAIN"

// command runs the command's main in a child process with args and
// returns its standard output, its standard error and its exit code.
func command(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--"}, args...)...)
	cmd.Env = append(os.Environ(), runMain+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("%v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// TestHelp: -h and -help print the usage on standard output and exit 0;
// the usage gives every flag's default, and each duration's unit.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		out, errOut, code := command(t, arg)
		if code != 0 || !strings.HasPrefix(out, "Usage: hotlimitd") || errOut != "" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout alone", arg, code, out, errOut)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out, io.Discard, nil, nil); err != nil {
		t.Fatalf("run -h: %v, want nil", err)
	}
	help := out.String()
	// -h's output, one block per flag.
	blocks := map[string]string{}
	for _, b := range strings.Split(help[strings.Index(help, "\n  -"):], "\n  -")[1:] {
		name, _, _ := strings.Cut(b, "\n")
		name, _, _ = strings.Cut(name, " ")
		blocks[name] = b
	}
	want := flagNames(t)
	if len(blocks) != len(want) {
		t.Fatalf("-h shows %d flags, the command has %d", len(blocks), len(want))
	}
	for name, fl := range want {
		b, ok := blocks[name]
		if !ok {
			t.Fatalf("-h does not show -%s", name)
		}
		if !strings.Contains(b, "(default") {
			t.Errorf("-%s: no default in %q", name, b)
		}
		if d, ok := fl.Value.(flag.Getter).Get().(time.Duration); ok {
			if !strings.HasPrefix(b, name+" duration\n") || !strings.Contains(b, "(default "+d.String()+")") {
				t.Errorf("-%s: want its type (duration) and its default with its unit (%v) in %q", name, d, b)
			}
		}
	}
}

// flagNames returns the command's flags by name.
func flagNames(t *testing.T) map[string]*flag.Flag {
	t.Helper()
	names := map[string]*flag.Flag{}
	newFlagSet(&flags{}).VisitAll(func(fl *flag.Flag) { names[fl.Name] = fl })
	return names
}

// TestBadFlagExit: a flag the command does not know exits 1, with an
// error naming it and the usage on standard error, nothing on standard
// output.
func TestBadFlagExit(t *testing.T) {
	out, errOut, code := command(t, "-nope")
	if code != 1 || out != "" || !strings.Contains(errOut, "-nope") || !strings.Contains(errOut, "Usage: hotlimitd") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1, the flag named and the usage on stderr", code, out, errOut)
	}
}

// TestConfigErrorsNameFlag: a -config that is missing or cannot be read
// stops the command with an error that names -config and the path.
func TestConfigErrorsNameFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "limits")
	if err := os.Mkdir(dangling, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone.yaml"), filepath.Join(dangling, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(dir, "missing.yaml"), // missing
		filepath.Join(file, "child.yaml"),  // under a file: not a directory
		dangling,                           // a directory whose file cannot be read
	} {
		err := run(context.Background(), []string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-config", path}, io.Discard, io.Discard, nil, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "-config "+path+": ") {
			t.Errorf("-config %s: error %v, want one starting -config %s:", path, err, path)
		}
	}
	_, errOut, code := command(t, "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-config", filepath.Join(dir, "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "hotlimitd: -config "+filepath.Join(dir, "missing.yaml")+": ") {
		t.Fatalf("missing -config: exit %d, stderr %q", code, errOut)
	}
}
