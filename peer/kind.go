package peer

import (
	"strings"

	"github.com/tare-dev/tare"
)

// kinds are tare's error kinds, which a tool's error text is mapped to so
// that stats group failures alike whatever tool sent the load.
var kinds = []string{tare.KindTimeout, tare.KindCanceled, tare.KindRefused, tare.KindReset,
	tare.KindDNS, tare.KindTLS, tare.KindEOF, tare.KindUnreachable, tare.KindConnect, tare.KindOther}

// errKind is the tare error kind of a result with the given status and the
// tool's error text: a transport error by its words (Go's, since vegeta
// and hey are Go programs), else a non-2xx status as "http 503", else "".
func errKind(status int, text string) string {
	// An answer's status says more than the tool's text for it (vegeta's
	// text for a 504 is "504 Gateway Timeout": an answer, not a timeout).
	if status != 0 && (status < 200 || status > 299) {
		return tare.HTTPKind(status)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	for _, k := range kinds {
		if text == k {
			return k
		}
	}
	if strings.HasPrefix(text, "http ") {
		return text
	}
	low := strings.ToLower(text)
	for _, m := range []struct{ word, kind string }{
		{"no such host", tare.KindDNS},
		{"server misbehaving", tare.KindDNS},
		{"context canceled", tare.KindCanceled},
		{"timeout", tare.KindTimeout},
		{"deadline exceeded", tare.KindTimeout},
		{"connection refused", tare.KindRefused},
		{"connection reset", tare.KindReset},
		{"broken pipe", tare.KindReset},
		{"no route to host", tare.KindUnreachable},
		{"network is unreachable", tare.KindUnreachable},
		{"tls: ", tare.KindTLS},
		{"x509: ", tare.KindTLS},
		{"eof", tare.KindEOF},
		{"dial ", tare.KindConnect},
	} {
		if strings.Contains(low, m.word) {
			return m.kind
		}
	}
	return tare.KindOther
}
