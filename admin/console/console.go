package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/admin"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// contentSecurityPolicy allows the console's own script and style only: no inline code, no other origin, no
// framing, forms posting back to the console only.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// Options tune a console; zero values take the defaults.
type Options struct {
	Log zerolog.Logger
	// IdleTimeout ends a session unused this long (default 30 minutes); Lifetime ends any session this long
	// after its sign-in (default 12 hours).
	IdleTimeout, Lifetime time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Console serves /console/.
type Console struct {
	api      *admin.API
	log      zerolog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	now      func() time.Time
}

// New builds the console over the in-process admin API.
func New(api *admin.API, o Options) (*Console, error) {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Minute
	}
	if o.Lifetime <= 0 {
		o.Lifetime = 12 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Console{api: api, log: o.Log, sessions: newSessions(o.IdleTimeout, o.Lifetime, o.Now), now: o.Now,
		pages: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", base, err)
		}
		c.pages[base] = t
	}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	m := http.NewServeMux()
	m.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", http.FileServerFS(assets)))
	m.HandleFunc("GET /console/signin", c.signinForm)
	m.HandleFunc("POST /console/signin", c.signin)
	m.HandleFunc("POST /console/signout", c.change(c.signout))
	m.HandleFunc("GET /console/{$}", c.page(c.overview))
	m.HandleFunc("GET /console/overview.json", c.page(c.overviewJSON))
	m.HandleFunc("GET /console/sources", c.page(c.sources))
	m.HandleFunc("GET /console/hooks", c.page(c.hook))
	m.HandleFunc("GET /console/dlq", c.page(c.dlq))
	m.HandleFunc("POST /console/dlq/replay", c.change(c.dlqReplay))
	m.HandleFunc("GET /console/quarantine", c.page(c.quarantine))
	m.HandleFunc("GET /console/quarantine/entry", c.page(c.quarantineEntry))
	m.HandleFunc("POST /console/quarantine/release", c.change(c.quarantineRelease))
	m.HandleFunc("POST /console/quarantine/purge", c.change(c.quarantinePurge))
	m.HandleFunc("GET /console/replays", c.page(c.replays))
	m.HandleFunc("POST /console/replays/{id}/{action}", c.change(c.steerReplay))
	m.HandleFunc("GET /console/audit", c.page(c.audit))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", nil, view{Title: "Not found", Message: "No such page."})
	})
	c.mux = m
	return c, nil
}

// ServeHTTP sets the security headers of every answer and routes it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// handler is a page or change of a signed-in session.
type handler func(w http.ResponseWriter, r *http.Request, s *session)

// page runs h for a signed-in session, else sends the browser to the sign-in form.
func (c *Console) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.sessions.get(r)
		if s == nil {
			if strings.HasSuffix(r.URL.Path, ".json") {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
				return
			}
			http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
			return
		}
		h(w, r, s)
	}
}

// change runs h for a signed-in session whose form carries its CSRF token; anything else is 403.
func (c *Console) change(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
		s := c.sessions.get(r)
		if s == nil {
			c.render(w, r, http.StatusForbidden, "error", nil, view{Title: "Refused",
				Message: "This change needs a signed-in session."})
			return
		}
		if !s.csrfOK(r) {
			c.log.Warn().Str("principal", s.caller.Name()).Str("client", r.RemoteAddr).Str("path", r.URL.Path).
				Msg("console change refused: missing or wrong CSRF token")
			c.render(w, r, http.StatusForbidden, "error", s, view{Title: "Refused",
				Message: "This change did not carry the form's CSRF token: reload the page and try again."})
			return
		}
		h(w, r, s)
	}
}

// view is what every template gets.
type view struct {
	Title   string
	Active  string
	Message string
	Error   string
	Data    any
	// Set by render.
	User       string
	CSRF       string
	AllTenants bool
	Tenants    []string
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, s *session, v view) {
	if s != nil {
		v.User, v.CSRF, v.AllTenants, v.Tenants = s.caller.Name(), s.csrf, s.caller.AllTenants(), s.caller.Tenants()
	}
	t := c.pages[name]
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		c.log.Error().Err(err).Str("page", name).Msg("console page failed to render")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// answer is the admin API's answer to one in-process call.
type answer struct {
	status int
	body   map[string]any
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// refusal says why the API refused, in the API's own words (its error code and the field, scope or tenant).
func (a answer) refusal() string {
	msg := fmt.Sprintf("The admin API answered %d %s", a.status, http.StatusText(a.status))
	if code, _ := a.body["error"].(string); code != "" {
		msg += ": " + code
		for _, k := range []string{"scope", "tenant", "field", "role", "state"} {
			if v, ok := a.body[k]; ok {
				msg += fmt.Sprintf(" (%s %v)", k, v)
			}
		}
	}
	return msg + "."
}

// recorder is the ResponseWriter of an in-process API call.
type recorder struct {
	h      http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.buf.Write(b)
}
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

// call sends method path?q with body (JSON, nil = none) to the admin API as s's principal.
func (c *Console) call(r *http.Request, s *session, method, path string, q url.Values, body any) answer {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{status: http.StatusInternalServerError}
		}
		rd = bytes.NewReader(b)
	}
	u := path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(r.Context(), method, u, rd)
	if err != nil {
		return answer{status: http.StatusInternalServerError}
	}
	req.RemoteAddr = r.RemoteAddr
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{h: http.Header{}}
	c.api.Serve(s.caller, rec, req)
	a := answer{status: rec.status}
	dec := json.NewDecoder(&rec.buf)
	dec.UseNumber()
	_ = dec.Decode(&a.body)
	return a
}

// refused renders the API's refusal with the API's status.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, s *session, active string, a answer) {
	c.render(w, r, a.status, "error", s, view{Title: "Refused", Active: active, Message: a.refusal()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *Console) signinForm(w http.ResponseWriter, r *http.Request) {
	if c.sessions.get(r) != nil {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", nil, view{Title: "Sign in"})
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	caller, ok := c.api.Authenticate(r.PostFormValue("token"))
	if !ok {
		c.log.Warn().Str("client", r.RemoteAddr).Msg("console sign-in refused: unknown token")
		c.render(w, r, http.StatusUnauthorized, "signin", nil, view{Title: "Sign in",
			Error: "No principal holds this token."})
		return
	}
	setCookie(w, r, c.sessions.start(caller), 0)
	c.log.Info().Str("principal", caller.Name()).Str("client", r.RemoteAddr).Msg("console sign-in")
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.end(r)
	setCookie(w, r, "", -1)
	c.log.Info().Str("principal", s.caller.Name()).Str("client", r.RemoteAddr).Msg("console sign-out")
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
}
