package sinks

import "strings"

// CredentialHeaders is the one list of request headers that carry a reusable credential: whoever holds the
// value can call as the sender. The edge's store_headers policy drops (or hashes) them before a hook is
// stored, and the default forward filter never passes them to a sink; both read this list, so the two can
// never disagree. Names are lowercase.
//
// Provider signatures (x-hub-signature-256, stripe-signature, webhook-signature, x-slack-signature,
// x-shopify-hmac-sha256, ...) are deliberately not on it: a signature is bound to one body (and, for the
// timestamped schemes, to a time), so it authorises nothing else, and it is what lets a quarantined hook be
// re-verified and a destination check the provider's proof itself. docs/security.md says why.
var CredentialHeaders = []string{
	"authorization",
	"proxy-authorization",
	"cookie",
	"set-cookie",
	"x-api-key",
	"x-apikey",
	"api-key",
	"apikey",
	"x-auth-token",
	"x-access-token",
	"x-gitlab-token",
	"private-token", // GitLab API token
	"x-webhook-token",
	"x-webhook-secret",
	"x-hook-secret", // Asana's handshake secret
	"x-vault-token",
	"x-amz-security-token",
	"x-goog-api-key",
	"x-functions-key",           // Azure Functions
	"ocp-apim-subscription-key", // Azure API Management
}

// IsCredentialHeader reports whether name (lowercase) is on CredentialHeaders.
func IsCredentialHeader(name string) bool {
	for _, c := range CredentialHeaders {
		if c == name {
			return true
		}
	}
	return false
}

// IsProxyHeader reports whether name (lowercase) is a header a proxy or the caller writes about where the
// request came from: forwarded, x-forwarded-*, x-real-ip, via and the CDN client-address headers. The caller
// controls every one of them, so a sink reading them would be told an origin nobody checked; the default
// forward filter drops them unless the source sets forward_proxy_headers.
func IsProxyHeader(name string) bool {
	switch name {
	case "forwarded", "x-real-ip", "via", "true-client-ip", "cf-connecting-ip", "fastly-client-ip",
		"x-client-ip", "x-cluster-client-ip", "x-original-forwarded-for":
		return true
	}
	return strings.HasPrefix(name, "x-forwarded-")
}
