package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// tlsFiles is the gRPC server's TLS material, read from files: the
// certificate chain and its key, and, for mTLS, the CA that client
// certificates must chain to. It reads them again at every TLS handshake
// (a few kB, against a handshake's far costlier signatures) and builds a
// new tls.Config when their bytes changed, so that a rotated certificate,
// key or CA (a file replaced or rewritten, a Kubernetes Secret's symlink
// swap) is served from the next connection on, without a restart.
// Connections already open keep the certificate they were made with.
//
// A change that does not load (a certificate not yet matched by its new
// key, a file missing for a moment) keeps the previous configuration: it
// is logged once per distinct error and tried again at the next
// handshake. Its methods are safe for concurrent use.
type tlsFiles struct {
	certFile, keyFile, caFile string // caFile "": TLS without client certificates
	log                       *slog.Logger

	mu      sync.Mutex // guards the fields below
	read    [3][]byte  // the bytes cfg was built from: cert, key, CA
	cfg     *tls.Config
	lastErr string // the error logged last, "" after a load
}

// newTLSFiles loads the files; an error names the file at fault.
func newTLSFiles(certFile, keyFile, caFile string, log *slog.Logger) (*tlsFiles, error) {
	t := &tlsFiles{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	if _, err := t.current(); err != nil {
		return nil, err
	}
	return t, nil
}

// serverConfig is the tls.Config for grpc's credentials.NewTLS: every
// handshake gets the current configuration from GetConfigForClient.
func (t *tlsFiles) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg, err := t.current()
			if err != nil && cfg == nil {
				return nil, err // not reached: newTLSFiles loaded once
			}
			return cfg, nil
		},
	}
}

// current reads the files and returns the configuration of their bytes:
// the one built before when they did not change, a new one when they
// did and it loads, else the previous one with the error (logged once).
func (t *tlsFiles) current() (*tls.Config, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var now [3][]byte
	var err error
	for i, name := range []string{t.certFile, t.keyFile, t.caFile} {
		if name == "" {
			continue
		}
		if now[i], err = os.ReadFile(name); err != nil {
			return t.failedLocked(err)
		}
	}
	if t.cfg != nil && bytes.Equal(now[0], t.read[0]) && bytes.Equal(now[1], t.read[1]) && bytes.Equal(now[2], t.read[2]) {
		return t.cfg, nil
	}
	cfg, err := t.build(now)
	if err != nil {
		return t.failedLocked(err)
	}
	if t.cfg != nil {
		t.log.Info("gRPC TLS: loaded the changed certificate files", "cert", t.certFile, "client_ca", t.caFile)
	}
	t.read, t.cfg, t.lastErr = now, cfg, ""
	return cfg, nil
}

// failedLocked keeps the configuration in use and logs err unless it is
// the error logged last. It requires t.mu.
func (t *tlsFiles) failedLocked(err error) (*tls.Config, error) {
	if t.cfg != nil && err.Error() != t.lastErr {
		t.lastErr = err.Error()
		t.log.Error("gRPC TLS: the certificate files do not load, the running ones are kept", "err", err.Error())
	}
	return t.cfg, err
}

// build makes the server's tls.Config from the files' bytes.
func (t *tlsFiles) build(b [3][]byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(b[0], b[1])
	if err != nil {
		return nil, fmt.Errorf("-grpc-tls-cert %s, -grpc-tls-key %s: %w", t.certFile, t.keyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2"}, // gRPC is HTTP/2; its clients require the ALPN
	}
	if t.caFile != "" {
		pool, err := certPool(b[2])
		if err != nil {
			return nil, fmt.Errorf("-grpc-tls-client-ca %s: %w", t.caFile, err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// certPool returns the pool of the PEM certificates in b, at least one.
func certPool(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no PEM certificate in the file")
	}
	return pool, nil
}
