// Package testservice finds the real services tests talk to: the Redis and
// the PostgreSQL that scripts/test starts, or those TARE_REDIS_URL and
// TARE_POSTGRES_DSN name; and starts the simulated model on loopback.
package testservice

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tare-dev/tare/modelsim"
)

// RedisURL is the test Redis: TARE_REDIS_URL, or the local default, and
// whether the environment named it.
func RedisURL() (url string, explicit bool) {
	if u := os.Getenv("TARE_REDIS_URL"); u != "" {
		return u, true
	}
	return "redis://127.0.0.1:6379/0", false
}

// Redis connects to the test Redis, closed when the test ends. When
// TARE_REDIS_URL is unset and nothing answers on the default address, Redis
// is Missing; when it is set, a server that does not answer fails the test.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	u, explicit := RedisURL()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("TARE_REDIS_URL %q: %v", u, err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		Unavailable(t, explicit, "no redis at %s (%v): run scripts/test, which starts one", opt.Addr, err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// PostgresDSN is the test PostgreSQL: TARE_POSTGRES_DSN, or the local
// default that scripts/test sets up.
func PostgresDSN() string {
	if dsn := os.Getenv("TARE_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres:postgres@127.0.0.1:5432/tare_test?sslmode=disable"
}

// PostgresExplicit reports whether TARE_POSTGRES_DSN names the test
// PostgreSQL (see Unavailable).
func PostgresExplicit() bool { return os.Getenv("TARE_POSTGRES_DSN") != "" }

// Model starts the simulated model on loopback, closed when the test ends.
func Model(t testing.TB, cfg modelsim.Config) *httptest.Server {
	t.Helper()
	s, err := modelsim.New(cfg)
	if err != nil {
		t.Fatalf("modelsim.New: %v", err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}
