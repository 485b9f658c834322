package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// testCA is a certificate authority made in process for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue returns the PEM certificate and key of a leaf with serial, for
// 127.0.0.1 (server) or as a client.
func (ca *testCA) issue(t *testing.T, serial int64, client bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "hotlimitd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses, tmpl.DNSNames = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// keyPair is issue's pair as a tls.Certificate, for a client.
func (ca *testCA) keyPair(t *testing.T, serial int64) tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, serial, true)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// askTLS asks the running command once over a new TLS connection
// (trusting roots, presenting certs) and returns the serial number of the
// certificate the server presented, or the RPC's error.
func askTLS(t *testing.T, r *running, roots *x509.CertPool, certs ...tls.Certificate) (int64, error) {
	t.Helper()
	conn, err := grpc.NewClient(r.a.grpcLis.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: certs})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return askOn(t, conn)
}

// askOn asks once on conn and returns the server certificate's serial.
func askOn(t *testing.T, conn *grpc.ClientConn) (int64, error) {
	t.Helper()
	// The deadline only turns a hang into a failure; a right server
	// answers long before it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p peer.Peer
	_, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "hotlimitd",
		Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "tls"}}}},
	}, grpc.Peer(&p))
	if err != nil {
		return 0, err
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		t.Fatalf("the RPC's peer has %T, not TLS", p.AuthInfo)
	}
	return info.State.PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestGRPCTLS: with -grpc-tls-cert and -grpc-tls-key the gRPC server
// speaks TLS only, and a certificate rewritten in its files is served from
// the next connection on, without a restart, while open connections keep
// theirs; files that do not load keep the running certificate (logged
// once). It fails with the files read once at start (serial 1 after the
// rotation).
func TestGRPCTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t, "hotlimitd test CA")
	c, k := ca.issue(t, 1, false)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	r := startCmd(t, nil, "-grpc-tls-cert", certFile, "-grpc-tls-key", keyFile)

	if serial, err := askTLS(t, r, ca.pool()); err != nil || serial != 1 {
		t.Fatalf("over TLS: serial %d, %v; want 1", serial, err)
	}
	if _, err := r.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "hotlimitd"}); err == nil {
		t.Fatal("a plaintext client was answered by a TLS server")
	}
	open, err := grpc.NewClient(r.a.grpcLis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.pool()})))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if serial, err := askOn(t, open); err != nil || serial != 1 {
		t.Fatalf("open connection: serial %d, %v; want 1", serial, err)
	}

	// Rotation in place: the key first, then the certificate.
	c, k = ca.issue(t, 2, false)
	writeFile(t, keyFile, k)
	writeFile(t, certFile, c)
	if serial, err := askTLS(t, r, ca.pool()); err != nil || serial != 2 {
		t.Fatalf("after the rotation: serial %d, %v; want 2", serial, err)
	}
	if serial, err := askOn(t, open); err != nil || serial != 1 {
		t.Fatalf("the connection opened before the rotation: serial %d, %v; want 1 still", serial, err)
	}

	// A certificate that does not load keeps serial 2, twice, logged once.
	writeFile(t, certFile, []byte("not a certificate"))
	for range 2 {
		if serial, err := askTLS(t, r, ca.pool()); err != nil || serial != 2 {
			t.Fatalf("with a broken certificate file: serial %d, %v; want 2 kept", serial, err)
		}
	}
	if n := strings.Count(r.logs.String(), "do not load"); n != 1 {
		t.Fatalf("the broken files were logged %d times, want once:\n%s", n, r.logs.String())
	}
}

// TestGRPCMTLS: with -grpc-tls-client-ca a client must present a
// certificate of that CA: one without a certificate, or with one of
// another CA, is refused; the CA file is read again when it changes
// (after it names CA 2, CA 1's clients are refused). It fails without
// ClientAuth (the certificate-less client is answered) and with the CA
// read once.
func TestGRPCMTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	serverCA, ca1, ca2 := newTestCA(t, "server CA"), newTestCA(t, "client CA 1"), newTestCA(t, "client CA 2")
	c, k := serverCA.issue(t, 1, false)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	writeFile(t, caFile, ca1.pem)
	r := startCmd(t, nil, "-grpc-tls-cert", certFile, "-grpc-tls-key", keyFile, "-grpc-tls-client-ca", caFile)

	if _, err := askTLS(t, r, serverCA.pool(), ca1.keyPair(t, 10)); err != nil {
		t.Fatalf("a client of the client CA: %v", err)
	}
	if _, err := askTLS(t, r, serverCA.pool()); err == nil {
		t.Fatal("a client without a certificate was answered under mTLS")
	}
	if _, err := askTLS(t, r, serverCA.pool(), ca2.keyPair(t, 11)); err == nil {
		t.Fatal("a client of another CA was answered")
	}

	writeFile(t, caFile, ca2.pem)
	if _, err := askTLS(t, r, serverCA.pool(), ca2.keyPair(t, 12)); err != nil {
		t.Fatalf("a client of the new client CA: %v", err)
	}
	if _, err := askTLS(t, r, serverCA.pool(), ca1.keyPair(t, 13)); err == nil {
		t.Fatal("a client of the replaced CA was answered")
	}
}

// TestGRPCTLSFlags: the TLS flags are refused alone or with files that
// do not load, by name, at start.
func TestGRPCTLSFlags(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	ca := newTestCA(t, "CA")
	c, k := ca.issue(t, 1, false)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	writeFile(t, caFile, []byte("no PEM here"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-grpc-tls-cert", certFile}, "go together"},
		{[]string{"-grpc-tls-key", keyFile}, "go together"},
		{[]string{"-grpc-tls-client-ca", caFile}, "needs -grpc-tls-cert"},
		{[]string{"-grpc-tls-cert", keyFile, "-grpc-tls-key", keyFile}, "-grpc-tls-cert " + keyFile},
		{[]string{"-grpc-tls-cert", certFile, "-grpc-tls-key", filepath.Join(dir, "missing")}, "missing"},
		{[]string{"-grpc-tls-cert", certFile, "-grpc-tls-key", keyFile, "-grpc-tls-client-ca", caFile}, "-grpc-tls-client-ca " + caFile + ": no PEM certificate"},
	} {
		args := append([]string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, tc.args...)
		err := run(context.Background(), args, io.Discard, io.Discard, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
