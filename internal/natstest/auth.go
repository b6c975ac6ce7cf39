package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// CA is a test certificate authority made for one test: an ECDSA P-256
// key and a self-signed certificate, written as PEM to File.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// File is the PEM file of Cert, for --nats-tls-ca or nats.RootCAs.
	File string
	dir  string
}

var serial atomic.Int64

// NewCA makes a CA whose files live under t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "outboxd test CA " + t.Name()},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, Key: key, dir: t.TempDir()}
	ca.File = writePEM(t, ca.dir, "ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate for name (its common name; a server
// certificate also gets the SANs 127.0.0.1 and localhost) and returns the
// PEM files of the certificate and of its key.
func (ca *CA) Issue(t testing.TB, name string, client bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	n := serial.Load()
	certFile = writePEM(t, ca.dir, filepath.Base(name)+"-"+big.NewInt(n).String()+".pem", "CERTIFICATE", der)
	keyFile = writePEM(t, ca.dir, filepath.Base(name)+"-"+big.NewInt(n).String()+"-key.pem", "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// WithTLS makes the server require TLS with a certificate for 127.0.0.1
// signed by ca; with verifyClients it also requires a client certificate
// signed by ca. Conn trusts ca and presents a client certificate.
func WithTLS(t testing.TB, ca *CA, verifyClients bool) Option {
	t.Helper()
	certFile, keyFile := ca.Issue(t, "nats-server", false)
	tlsConfig, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: certFile, KeyFile: keyFile, CaFile: ca.File, Verify: verifyClients,
	})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := ca.Issue(t, "natstest-client", true)
	return func(c *settings) {
		c.tune = append(c.tune, func(o *server.Options) {
			o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, verifyClients, tlsConfig, 5
		})
		c.client = append(c.client, nats.RootCAs(ca.File), nats.ClientCert(clientCert, clientKey))
	}
}

// WithUsers makes the server require a user name and password, from
// users (Permissions nil: the user may do everything). Conn logs in as the
// first user, so make it the test's admin.
func WithUsers(users ...*server.User) Option {
	return func(c *settings) {
		c.tune = append(c.tune, func(o *server.Options) { o.Users = append(o.Users, users...) })
		if len(users) > 0 {
			c.client = append(c.client, nats.UserInfo(users[0].Username, users[0].Password))
		}
	}
}

// WithToken makes the server require token; Conn presents it.
func WithToken(token string) Option {
	return func(c *settings) {
		c.tune = append(c.tune, func(o *server.Options) { o.Authorization = token })
		c.client = append(c.client, nats.Token(token))
	}
}

// WithNkeyUser adds a user who authenticates with the nkey pair kp (a user
// key, nkeys.CreateUser) and has perms (nil: everything). Conn logs in as
// that user: combine it with WithUsers or WithToken only with an explicit
// login in Conn's opts.
func WithNkeyUser(kp nkeys.KeyPair, perms *server.Permissions) Option {
	return func(c *settings) {
		pub, err := kp.PublicKey()
		if err != nil {
			panic("BUG: natstest: nkey without a public key: " + err.Error())
		}
		c.tune = append(c.tune, func(o *server.Options) {
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: pub, Permissions: perms})
		})
		c.client = append(c.client, nats.Nkey(pub, kp.Sign))
	}
}

// PublishOnly is a permission set that allows publishing to the subjects
// in allow and nothing else, and subscribing to everything.
func PublishOnly(allow ...string) *server.Permissions {
	return &server.Permissions{Publish: &server.SubjectPermission{Allow: allow}}
}
