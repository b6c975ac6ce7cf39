package pgcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TLSOptions turns on TLS (ssl = on) with a server certificate signed by a
// certificate authority made for this cluster alone.
type TLSOptions struct {
	// Hosts are the server certificate's subject alternative names: IP
	// addresses or DNS names. Default: 127.0.0.1 and localhost. Naming
	// another host makes a certificate that verify-full must refuse.
	Hosts []string
	// Require makes pg_hba.conf accept TCP connections (normal and
	// replication) only over TLS (hostssl), so a client with
	// sslmode=disable is refused. DSN then uses sslmode=require.
	Require bool
}

// CA is a certificate authority made in memory: its certificate and key.
type CA struct {
	// PEM is the CA certificate, PEM-encoded, for sslrootcert.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed ECDSA P-256 certificate authority valid for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// Issue makes a server certificate for hosts (IP addresses or DNS names)
// signed by ca, and returns it and its private key, PEM-encoded.
func (ca *CA) Issue(hosts []string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("issue certificate: no hosts")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate for %v: %w", hosts, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic("BUG: crypto/rand failed: " + err.Error())
	}
	return n
}

// setUpTLS writes ca.crt to the cluster folder and server.crt and
// server.key to the data folder, owned by the server user (PostgreSQL
// refuses a key that others may read), and returns the settings that turn
// TLS on.
func (c *Cluster) setUpTLS(o *TLSOptions) (map[string]string, error) {
	hosts := o.Hosts
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	ca, err := NewCA("pgcluster test CA")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(hosts)
	if err != nil {
		return nil, err
	}
	c.caFile = filepath.Join(c.dir, "ca.crt")
	if err := os.WriteFile(c.caFile, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	certFile := filepath.Join(c.dataDir(), "server.crt")
	keyFile := filepath.Join(c.dataDir(), "server.key")
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{certFile, certPEM, 0o644}, {keyFile, keyPEM, 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, err
		}
		if err := os.Chmod(f.path, f.mode); err != nil { // WriteFile's mode is filtered by umask
			return nil, err
		}
		if c.user != nil {
			if err := os.Chown(f.path, int(c.user.uid), int(c.user.gid)); err != nil {
				return nil, err
			}
		}
	}
	if o.Require {
		if err := c.requireHostSSL(); err != nil {
			return nil, fmt.Errorf("write pg_hba.conf: %w", err)
		}
	}
	return map[string]string{"ssl": "on", "ssl_cert_file": certFile, "ssl_key_file": keyFile}, nil
}

// requireHostSSL replaces initdb's host lines with hostssl ones, so TCP
// connections without TLS match no line and are refused. Unix-socket
// connections stay allowed: TLS does not apply to them.
func (c *Cluster) requireHostSSL() error {
	path := filepath.Join(c.dataDir(), "pg_hba.conf")
	hba := strings.Join([]string{
		"# Written by outboxd's pgcluster: TCP only over TLS.",
		"local all         all              trust",
		"local replication all              trust",
		"hostssl all         all 127.0.0.1/32 trust",
		"hostssl replication all 127.0.0.1/32 trust",
		"",
	}, "\n")
	return os.WriteFile(path, []byte(hba), 0o600) // keeps the owner initdb gave it
}

// CAFile returns the path of the PEM file holding the certificate of the
// authority that signed the server's certificate (for sslrootcert), or ""
// if the cluster was started without TLS.
func (c *Cluster) CAFile() string { return c.caFile }
