package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/outboxd/outboxd/internal/testenv/testca"
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

// CA is a certificate authority made in memory (see package testca).
type CA = testca.CA

// NewCA makes a self-signed certificate authority valid for a day.
func NewCA(name string) (*CA, error) { return testca.New(name) }

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
	certPEM, keyPEM, err := ca.Server(hosts...)
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
