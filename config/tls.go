package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ServerConfig builds a listener's TLS from http.tls or admin.tls; nil when TLS is off. client_auth
// require asks for a certificate that chains to client_ca_file. client_auth request asks for one and, when
// verifyRequested is set and client_ca_file is given, verifies the one sent against it (the admin
// listener); otherwise any certificate is taken unverified (the ingest listener, whose client_cert sources
// check it against their pins).
func (t TLS) ServerConfig(verifyRequested bool) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load the TLS certificate: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	switch t.ClientAuth {
	case "request":
		c.ClientAuth = tls.RequestClientCert
		if verifyRequested && t.ClientCAFile != "" {
			if c.ClientCAs, err = LoadCertPool(t.ClientCAFile); err != nil {
				return nil, fmt.Errorf("client_ca_file: %w", err)
			}
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
	case "require":
		if c.ClientCAs, err = LoadCertPool(t.ClientCAFile); err != nil {
			return nil, fmt.Errorf("client_ca_file: %w", err)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// LoadCertPool reads a PEM file of CA certificates.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(path + " holds no PEM certificate")
	}
	return pool, nil
}
