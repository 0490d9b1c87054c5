package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/ankusa-go/ankusa/admin"
)

// cookieName is the session cookie (scoped to /console/).
const cookieName = "ankusa_console"

// session is one signed-in principal.
type session struct {
	caller  admin.Caller
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions holds the live sessions by the SHA-256 of their id: a leak of this map (a heap dump) gives no cookie.
type sessions struct {
	mu       sync.Mutex
	m        map[[sha256.Size]byte]*session
	idle     time.Duration
	lifetime time.Duration
	now      func() time.Time
}

func newSessions(idle, lifetime time.Duration, now func() time.Time) *sessions {
	return &sessions{m: make(map[[sha256.Size]byte]*session), idle: idle, lifetime: lifetime, now: now}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start records a session for c and returns its id (the cookie's value).
func (s *sessions) start(c admin.Caller) string {
	id := randomToken()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if s.expired(v, now) {
			delete(s.m, k)
		}
	}
	s.m[sha256.Sum256([]byte(id))] = &session{caller: c, csrf: randomToken(), created: now, seen: now}
	return id
}

func (s *sessions) expired(v *session, now time.Time) bool {
	return now.Sub(v.seen) > s.idle || now.Sub(v.created) > s.lifetime
}

// get returns the live session of r's cookie (nil when none), and marks it seen.
func (s *sessions) get(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	k := sha256.Sum256([]byte(ck.Value))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[k]
	if v == nil {
		return nil
	}
	if s.expired(v, now) {
		delete(s.m, k)
		return nil
	}
	v.seen = now
	return v
}

// end forgets r's session.
func (s *sessions) end(r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		delete(s.m, sha256.Sum256([]byte(ck.Value)))
		s.mu.Unlock()
	}
}

// csrfOK reports whether r's form carries the session's CSRF token.
func (v *session) csrfOK(r *http.Request) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(v.csrf)) == 1
}

func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: "/console/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}
