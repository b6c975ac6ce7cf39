package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/outboxd/outboxd/internal/testenv/testca"
)

// CA is a test certificate authority (see package testca) whose files
// live under one test's temporary folder.
type CA struct {
	// File is the PEM file of the CA certificate, for --nats-tls-ca or
	// nats.RootCAs.
	File string
	ca   *testca.CA
	dir  string
	n    int
}

// NewCA makes a CA whose files live under t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca, err := testca.New("outboxd test CA " + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	c := &CA{ca: ca, dir: t.TempDir()}
	c.File = c.write(t, "ca.pem", ca.PEM)
	return c
}

// Issue signs a certificate and returns the PEM files of the certificate
// and of its key: a client certificate with common name name, or a server
// certificate for 127.0.0.1 and localhost.
func (ca *CA) Issue(t testing.TB, name string, client bool) (certFile, keyFile string) {
	t.Helper()
	issue := func() ([]byte, []byte, error) { return ca.ca.Server("127.0.0.1", "localhost") }
	if client {
		issue = func() ([]byte, []byte, error) { return ca.ca.Client(name) }
	}
	certPEM, keyPEM, err := issue()
	if err != nil {
		t.Fatal(err)
	}
	ca.n++
	base := fmt.Sprintf("%s-%d", filepath.Base(name), ca.n)
	return ca.write(t, base+".pem", certPEM), ca.write(t, base+"-key.pem", keyPEM)
}

func (ca *CA) write(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
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
