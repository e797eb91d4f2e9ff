package tare

import (
	"regexp"
	"strings"
	"unicode"
)

// Redacted replaces a secret wherever tare would show or keep it: printed
// targets, stored configurations, exports, reports.
const Redacted = "[redacted]"

// Secrets never reach a stored run, a log or a report. Every package that
// shows or keeps user input redacts it with these functions, so one list of
// what counts as a secret serves them all.
var (
	// scheme://user:password@ in any URL inside a value.
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^/\s@]*@`)
	// name=value in a query string or a key=value list such as a
	// PostgreSQL DSN.
	queryParam = regexp.MustCompile(`([?&;\s]|^)([^=&;?\s]+)=([^&;#\s]*)`)
	// A header line that carries a credential.
	credentialHeader = regexp.MustCompile(`(?i)\b(proxy-authorization|authorization|x-api-key|api-key|set-cookie|cookie)\s*:\s*[^\r\n]*`)
	// An HTTP credential on its own: "Bearer abc…".
	bearer = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`)
)

// RedactConfig returns a copy of cfg with the values of secret-looking keys
// replaced and credentials inside the other values removed.
func RedactConfig(cfg map[string]string) map[string]string {
	if cfg == nil {
		return nil
	}
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		if IsSecretName(k) && v != "" {
			out[k] = Redacted
			continue
		}
		out[k] = RedactText(v)
	}
	return out
}

// RedactText removes credentials from a free-form value: URL passwords,
// secret-looking query parameters, credential headers and bearer tokens.
func RedactText(s string) string {
	if s == "" {
		return s
	}
	s = urlPassword.ReplaceAllString(s, "$1:redacted@")
	s = queryParam.ReplaceAllStringFunc(s, func(m string) string {
		sub := queryParam.FindStringSubmatch(m)
		if sub[3] == "" || !IsSecretName(sub[2]) {
			return m
		}
		return sub[1] + sub[2] + "=" + Redacted
	})
	s = credentialHeader.ReplaceAllString(s, "$1: "+Redacted)
	s = bearer.ReplaceAllString(s, "$1 "+Redacted)
	return s
}

// Words that make a config key a secret. "token" is one but "tokens" is
// not, so max_tokens stays readable.
var secretWords = map[string]bool{
	"authorization": true, "auth": true, "token": true, "secret": true,
	"password": true, "passwd": true, "pwd": true, "apikey": true,
	"cookie": true, "credential": true, "credentials": true, "bearer": true,
	"key": true, "signature": true, "sig": true,
}

// secretPairs are two adjacent words that together name a secret.
var secretPairs = map[[2]string]bool{
	{"api", "key"}: true, {"access", "key"}: true, {"private", "key"}: true,
	{"session", "id"}: true, {"signing", "key"}: true,
}

// IsSecretName reports whether a config key, header or query parameter
// names a secret, looking at its words: "X-Api-Key", "openaiApiKey",
// "auth_token", "key" and "DB_PASSWORD" do, "max_tokens" and "target" do not.
func IsSecretName(key string) bool {
	words := splitWords(key)
	for i, w := range words {
		if secretWords[w] {
			return true
		}
		if i > 0 && secretPairs[[2]string{words[i-1], w}] {
			return true
		}
	}
	return false
}

// splitWords splits an identifier into lower-case words at punctuation and
// at camelCase boundaries ("openaiAPIKey" → openai, api, key).
func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && len(cur) > 0:
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			// "aB" starts a word at B; so does the last capital of "APIKey".
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}
