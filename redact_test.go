package tare

import (
	"reflect"
	"strings"
	"testing"
)

func TestIsSecretName(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"authorization", true},
		{"Authorization", true},
		{"X-Api-Key", true},
		{"api_key", true},
		{"apikey", true},
		{"openaiAPIKey", true},
		{"OPENAI_API_KEY", true},
		{"auth_token", true},
		{"token", true},
		{"accessToken", true},
		{"client_secret", true},
		{"DB_PASSWORD", true},
		{"aws_access_key_id", true},
		{"cookie", true},
		{"max_tokens", false},
		{"output_tokens", false},
		{"tokenizer", false},
		{"target", false},
		{"rate", false},
		{"keyspace", false},
		{"key", true},
		{"X-Amz-Signature", true},
		{"monkey", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsSecretName(tt.key); got != tt.want {
			t.Errorf("IsSecretName(%q) = %v (words %q), want %v", tt.key, got, splitWords(tt.key), tt.want)
		}
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"openaiAPIKey", []string{"openai", "api", "key"}},
		{"X-Api-Key", []string{"x", "api", "key"}},
		{"max_tokens", []string{"max", "tokens"}},
		{"HTTPServer2Go", []string{"http", "server2", "go"}},
		{"--", nil},
	}
	for _, tt := range tests {
		if got := splitWords(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain URL", "http://127.0.0.1:8080/checkout", "http://127.0.0.1:8080/checkout"},
		{"URL password", "redis://:hunter2@127.0.0.1:6379/0", "redis://:redacted@127.0.0.1:6379/0"},
		{"user and password", "postgres://tare:pa55@127.0.0.1/db?sslmode=disable",
			"postgres://tare:redacted@127.0.0.1/db?sslmode=disable"},
		{"user without password", "postgres://tare@127.0.0.1/db", "postgres://tare@127.0.0.1/db"},
		{"secret query parameter", "http://h/v1?model=x&api_key=sk-123&n=2", "http://h/v1?model=x&api_key=[redacted]&n=2"},
		{"harmless query parameter", "http://h/v1?max_tokens=256", "http://h/v1?max_tokens=256"},
		{"key=value DSN", "host=127.0.0.1 password=pa55 dbname=x", "host=127.0.0.1 password=[redacted] dbname=x"},
		{"header", "Authorization: Bearer abc.def", "Authorization: [redacted]"},
		{"api key header", "x-api-key:sk-123", "x-api-key: [redacted]"},
		{"bearer alone", "curl -H 'Bearer abcdefghijkl'", "curl -H 'Bearer [redacted]'"},
		{"two URLs", "a://u:p@h b://v:q@k", "a://u:redacted@h b://v:redacted@k"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactText(tt.in); got != tt.want {
				t.Errorf("RedactText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactConfig(t *testing.T) {
	if RedactConfig(nil) != nil {
		t.Error("RedactConfig(nil) is not nil")
	}
	in := map[string]string{"token": "abc", "empty_token": "", "queue": "redis://:pw@127.0.0.1:6379/0"}
	want := map[string]string{"token": Redacted, "empty_token": "", "queue": "redis://:redacted@127.0.0.1:6379/0"}
	if got := RedactConfig(in); !reflect.DeepEqual(got, want) {
		t.Errorf("RedactConfig = %v, want %v", got, want)
	}
}

func FuzzRedactText(f *testing.F) {
	for _, s := range []string{
		"redis://:hunter2@127.0.0.1:6379/0",
		"http://h/v1?api_key=sk-123&n=2",
		"Authorization: Bearer abcdefghijkl",
		"a://u:p@h b://v:q@k",
		"?=&;=",
		"x://:@",
		"token=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := RedactText(s)
		if twice := RedactText(once); twice != once {
			t.Fatalf("not idempotent: %q → %q → %q", s, once, twice)
		}
		// A password planted in a URL never survives.
		planted := "x://user:Zq8secretZq8@" + s
		if strings.Contains(RedactText(planted), "Zq8secretZq8") && !strings.Contains(s, "Zq8secretZq8") {
			t.Fatalf("password survived in %q", RedactText(planted))
		}
	})
}
