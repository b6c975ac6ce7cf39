package testca

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

// TestChains: server and client certificates verify against their CA for
// the names they carry, and not against another CA or for another host.
func TestChains(t *testing.T) {
	ca, err := New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := New("other CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Server("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := func(c *CA) *x509.CertPool {
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(c.PEM)
		return p
	}
	tests := []struct {
		name    string
		roots   *CA
		host    string
		wantErr bool
	}{
		{"ip", ca, "127.0.0.1", false},
		{"dns", ca, "localhost", false},
		{"wrong host", ca, "db.example", true},
		{"wrong CA", other, "127.0.0.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{Roots: pool(tt.roots), DNSName: tt.host})
			if (err != nil) != tt.wantErr {
				t.Errorf("Verify(%s) error = %v, wantErr %v", tt.host, err, tt.wantErr)
			}
		})
	}
	if _, _, err := ca.Server(); err == nil {
		t.Error("Server() with no hosts: want an error")
	}
	clientPEM, _, err := ca.Client("outboxd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(clientPEM, keyPEM); err == nil {
		t.Error("a client certificate paired with another key: want an error")
	}
}
