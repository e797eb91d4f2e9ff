package celery

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/tare-dev/tare/queue"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseCeleryTime(t *testing.T) {
	want := time.Date(2026, 12, 1, 13, 35, 53, 521115000, time.UTC)
	for _, s := range []string{"2026-12-01T13:35:53.521115", "2026-12-01T13:35:53.521115+00:00", "2026-12-01T14:35:53.521115+01:00"} {
		if got, ok := parseCeleryTime(s); !ok || !got.Equal(want) {
			t.Errorf("parseCeleryTime(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if _, ok := parseCeleryTime("yesterday"); ok {
		t.Error("parseCeleryTime(yesterday) ok")
	}
}

// TestCeleryMessage: a task message carries protocol 2's headers and a
// body of [args, kwargs, embed], as Celery's Redis transport expects.
func TestCeleryMessage(t *testing.T) {
	c := &Source{f: queue.FrameworkURL{Queue: "agents", Task: "tasks.answer"}, origin: "tare1@h"}
	m, err := c.message("tare-r-1", []any{uint64(1)}, map[string]any{"prompt": "hi"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := m.envelope()
	if err != nil {
		t.Fatal(err)
	}
	var env celeryEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"lang": "py", "task": "tasks.answer", "id": "tare-r-1", "root_id": "tare-r-1"} {
		if env.Headers[k] != want {
			t.Errorf("header %s = %v, want %v", k, env.Headers[k], want)
		}
	}
	info, _ := env.Properties["delivery_info"].(map[string]any)
	if env.Properties["correlation_id"] != "tare-r-1" || env.Properties["body_encoding"] != "base64" || info["routing_key"] != "agents" {
		t.Errorf("properties %v", env.Properties)
	}
	body, err := base64.StdEncoding.DecodeString(env.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[[1],{"prompt":"hi"},{"callbacks":null,"chain":null,"chord":null,"errbacks":null}]`; string(body) != want {
		t.Errorf("body %s, want %s", body, want)
	}
}

// TestCeleryMessageExpires: with a job timeout the task expires that long
// after it was enqueued, written as Celery writes times (and its message
// too, on an AMQP broker); without, never.
func TestCeleryMessageExpires(t *testing.T) {
	enqueued := time.Date(2026, 12, 1, 17, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tt := range []struct {
		timeout time.Duration
		want    any
	}{
		{0, nil},
		{90 * time.Second, "2026-12-01T16:01:30.123456+00:00"},
	} {
		c := &Source{f: queue.FrameworkURL{Queue: "agents", Task: "tasks.answer"}, fw: queue.FrameworkConfig{Timeout: tt.timeout}}
		m, err := c.message("tare-r-1", nil, nil, enqueued)
		if err != nil {
			t.Fatal(err)
		}
		if m.expiry != tt.timeout {
			t.Errorf("timeout %v: the message expires in the broker after %v", tt.timeout, m.expiry)
		}
		raw, err := m.envelope()
		if err != nil {
			t.Fatal(err)
		}
		var env celeryEnvelope
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatal(err)
		}
		if got := env.Headers["expires"]; got != tt.want {
			t.Errorf("timeout %v: expires %v; want %v", tt.timeout, got, tt.want)
		}
	}
}
