// Package redact keeps passwords out of what faultline writes: logs,
// reports, results and the terminal. It knows two kinds of secret: the
// password part of a URL's userinfo (and the password= of a PostgreSQL
// key=value DSN), found by their shape in any text, and known secret
// strings (a run's random passwords, the external provider's passwords),
// replaced wherever they appear.
package redact

import (
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask replaces every password it hides, as url.URL.Redacted does.
const Mask = "xxxxx"

var (
	// userinfoPassword matches scheme://user:password@ in running text. The
	// password runs to the last @ before the next space, slash, ? or #, so
	// an unescaped @ inside it is covered too.
	userinfoPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*):[^\s/?#]*@`)
	// dsnPassword matches password=... of a key=value DSN or a URL query:
	// a single-quoted value (with \' and \\ escapes) or one up to the next
	// space or &.
	dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'][^\s&]*)`)
)

// URL returns raw with its password masked: a URL's userinfo password as
// url.URL.Redacted masks it, a DSN's password= value. Text that is neither
// comes back with any URL or password= inside it masked the same way.
func URL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && !strings.ContainsAny(raw, " \t\r\n") {
		if q := u.Query(); q.Has("password") {
			q.Set("password", Mask)
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return shapes(raw)
}

// shapes masks the passwords found by their shape in s.
func shapes(s string) string {
	if strings.Contains(s, "://") {
		s = userinfoPassword.ReplaceAllString(s, "${1}:"+Mask+"@")
	}
	if strings.Contains(strings.ToLower(s), "password") {
		s = dsnPassword.ReplaceAllString(s, "${1}"+Mask)
	}
	return s
}

// Redactor masks known secrets and URL passwords in text. Its secrets are
// fixed at New, so one Redactor may be used from any goroutine. The zero
// value and nil mask URL passwords only.
type Redactor struct {
	secrets []string // longest first, so a secret inside another is not left half-masked
}

// New returns a Redactor of secrets. Empty strings are dropped; each secret
// is also known in its URL-escaped forms, as it appears inside a URL. Every
// occurrence is masked, so a password that is also a common word (a
// password "postgres") masks that word everywhere: unreadable, never leaked.
func New(secrets ...string) *Redactor {
	var all []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		all = append(all, s, url.QueryEscape(s), url.PathEscape(s), url.UserPassword("", s).String()[1:])
	}
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{secrets: slices.Compact(all)}
}

// String returns s with every known secret and every URL or DSN password
// replaced by Mask.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, secret := range r.secrets {
			if strings.Contains(s, secret) {
				s = strings.ReplaceAll(s, secret, Mask)
			}
		}
	}
	return shapes(s)
}

// Strings masks every element of ss in place.
func (r *Redactor) Strings(ss []string) {
	for i := range ss {
		ss[i] = r.String(ss[i])
	}
}

// Error returns err with its message masked; errors.Is and errors.As still
// see the original. nil stays nil, and an error with nothing to mask comes
// back as it is.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	masked := r.String(msg)
	if masked == msg {
		return err
	}
	return &redacted{msg: masked, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Writer returns a writer that masks each Write's text before passing it to
// w. It masks within one Write: a secret split across two Writes is not
// seen, so give it whole lines (fmt.Fprintf of a line, log.Logger). It
// reports len(p) written when w takes the whole masked text.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	return writer{r: r, w: w}
}

type writer struct {
	r *Redactor
	w io.Writer
}

func (w writer) Write(p []byte) (int, error) {
	masked := w.r.String(string(p))
	n, err := io.WriteString(w.w, masked)
	if err != nil {
		return 0, err
	}
	if n < len(masked) {
		return 0, io.ErrShortWrite
	}
	return len(p), nil
}
