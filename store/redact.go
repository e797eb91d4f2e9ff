package store

import (
	"regexp"
	"strings"
	"unicode"
)

// redacted replaces a secret in a stored run's config or target.
const redacted = "[redacted]"

// The caller redacts secrets before a run reaches the store; this is the
// second line, so a missed header or password does not sit in a database
// that may be shared with a team.
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

// redactConfig returns a copy of cfg with the values of secret-looking keys
// replaced and credentials inside the other values removed.
func redactConfig(cfg map[string]string) map[string]string {
	if cfg == nil {
		return nil
	}
	out := make(map[string]string, len(cfg))
	for k, v := range cfg {
		if isSecretKey(k) && v != "" {
			out[k] = redacted
			continue
		}
		out[k] = redactURLs(v)
	}
	return out
}

// redactURLs removes credentials from a free-form value: URL passwords,
// secret-looking query parameters, credential headers and bearer tokens.
func redactURLs(s string) string {
	if s == "" {
		return s
	}
	s = urlPassword.ReplaceAllString(s, "$1:redacted@")
	s = queryParam.ReplaceAllStringFunc(s, func(m string) string {
		sub := queryParam.FindStringSubmatch(m)
		if sub[3] == "" || !isSecretKey(sub[2]) {
			return m
		}
		return sub[1] + sub[2] + "=" + redacted
	})
	s = credentialHeader.ReplaceAllString(s, "$1: "+redacted)
	s = bearer.ReplaceAllString(s, "$1 "+redacted)
	return s
}

// Words that make a config key a secret. "token" is one but "tokens" is
// not, so max_tokens stays readable.
var secretWords = map[string]bool{
	"authorization": true, "auth": true, "token": true, "secret": true,
	"password": true, "passwd": true, "pwd": true, "apikey": true,
	"cookie": true, "credential": true, "credentials": true, "bearer": true,
}

// secretPairs are two adjacent words that together name a secret.
var secretPairs = map[[2]string]bool{
	{"api", "key"}: true, {"access", "key"}: true, {"private", "key"}: true,
	{"session", "id"}: true, {"signing", "key"}: true,
}

// isSecretKey reports whether a config key names a secret, looking at its
// words: "X-Api-Key", "openaiApiKey", "auth_token" and "DB_PASSWORD" do,
// "max_tokens" and "target" do not.
func isSecretKey(key string) bool {
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
