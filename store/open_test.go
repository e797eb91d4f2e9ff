package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/uuid"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
)

func TestOpenDispatch(t *testing.T) {
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "a", "b", "tare.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sq, ok := s.(*SQLite); !ok || sq.Path() != path {
		t.Errorf("Open(%q) = %T, want *SQLite at that path", path, s)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("OpenSQLite did not create the store and its directories: %v", err)
	}

	for _, scheme := range []string{"postgres", "postgresql", "POSTGRES"} {
		dsn := strings.Replace(postgresDSN(), "postgres", scheme, 1)
		if !strings.HasPrefix(postgresDSN(), "postgres://") {
			t.Skip("TARE_POSTGRES_DSN is not a URL")
		}
		p, err := Open(ctx, dsn)
		if err != nil {
			t.Fatalf("Open(%s://…): %v", scheme, err)
		}
		if _, ok := p.(*Postgres); !ok {
			t.Errorf("Open(%s://…) = %T, want *Postgres", scheme, p)
		}
		p.Close()
	}

	// $TARE_DB names a PostgreSQL as well as a file (a pod's store DSN,
	// from a Secret), never a SQLite file called "postgres:".
	t.Setenv("TARE_DB", postgresDSN())
	p, err := Open(ctx, "")
	if err != nil {
		t.Fatalf("Open(\"\") with TARE_DB=postgres://…: %v", err)
	}
	defer p.Close()
	if _, ok := p.(*Postgres); !ok {
		t.Errorf("Open(\"\") with TARE_DB=postgres://… = %T, want *Postgres", p)
	}
}

func TestIsPostgres(t *testing.T) {
	tests := []struct {
		dsn  string
		want bool
	}{
		{"postgres://u@127.0.0.1/db", true},
		{"postgresql://u@127.0.0.1/db", true},
		{"PostgreSQL://u@127.0.0.1/db", true},
		{"/var/lib/tare/tare.db", false},
		{"tare.db", false},
		{"postgres.db", false},
		{"./postgres://x", false},
		{"host=127.0.0.1 dbname=tare", false}, // the brief: anything else is a path
		{"", false},
	}
	for _, tt := range tests {
		if got := isPostgres(tt.dsn); got != tt.want {
			t.Errorf("isPostgres(%q) = %v, want %v", tt.dsn, got, tt.want)
		}
	}
}

func TestDefaultPath(t *testing.T) {
	home, _ := os.UserHomeDir()
	tests := []struct {
		name   string
		tareDB string
		xdg    string
		want   string
	}{
		{"TARE_DB wins", "/srv/tare.db", "/xdg", "/srv/tare.db"},
		{"XDG_DATA_HOME", "", "/xdg", "/xdg/tare/tare.db"},
		{"relative XDG_DATA_HOME is ignored", "", "xdg", filepath.Join(home, ".local/share/tare/tare.db")},
		{"home", "", "", filepath.Join(home, ".local/share/tare/tare.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TARE_DB", tt.tareDB)
			t.Setenv("XDG_DATA_HOME", tt.xdg)
			if got := DefaultPath(); got != tt.want {
				t.Errorf("DefaultPath() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewRunID(t *testing.T) {
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = NewRunID()
		if u, err := uuid.Parse(ids[i]); err != nil || u.Version() != 7 {
			t.Fatalf("NewRunID() = %q, not a UUIDv7 (%v)", ids[i], err)
		}
	}
	if !sort.StringsAreSorted(ids) {
		t.Error("run ids made one after another do not sort in creation order")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("NewRunID repeated %q", id)
		}
		seen[id] = true
	}
}

// mountTmpfs mounts a small tmpfs at dir for the test, or skips.
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	testservice.Root(t, "mounting a tmpfs")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		testservice.Unable(t, "cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// TestOpenSQLiteUnwritable: a store that cannot be written fails at open,
// with an error a user can act on that names the path.
func TestOpenSQLiteUnwritable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) string // returns the store path
		code  string
		says  string
	}{
		{"parent is a file", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(f, "tare.db")
		}, tare.EINVALID, "not a directory"},
		{"path is a directory", func(t *testing.T) string {
			return t.TempDir()
		}, tare.EINVALID, "is a directory"},
		{"not a database", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "notes.txt")
			if err := os.WriteFile(p, []byte(strings.Repeat("not a database\n", 400)), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, tare.EINVALID, "not a tare store"},
		{"directory without write permission", func(t *testing.T) string {
			if os.Geteuid() == 0 {
				t.Skip("root writes through permissions; the read-only mount case covers this")
			}
			d := filepath.Join(t.TempDir(), "ro")
			if err := os.Mkdir(d, 0o500); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "tare.db")
		}, tare.EINVALID, "permission denied"},
		{"read-only file system", func(t *testing.T) string {
			d := t.TempDir()
			mountTmpfs(t, d, "ro,size=1m")
			return filepath.Join(d, "tare.db")
		}, tare.EINVALID, "read-only file system"},
		{"full disk", func(t *testing.T) string {
			d := t.TempDir()
			mountTmpfs(t, d, "size=256k")
			// Fill it to the last block.
			f, err := os.Create(filepath.Join(d, "filler"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			block := make([]byte, 4096)
			for {
				if _, err := f.Write(block); err != nil {
					break
				}
			}
			return filepath.Join(d, "tare.db")
		}, tare.EUNAVAILABLE, "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t)
			s, err := OpenSQLite(testContext(t), path)
			if err == nil {
				s.Close()
				t.Fatalf("OpenSQLite(%q) succeeded", path)
			}
			wantCode(t, err, tt.code)
			msg := tare.ErrorMessage(err)
			if !strings.Contains(msg, path) || !strings.Contains(msg, tt.says) {
				t.Errorf("message %q should name %q and say %q", msg, path, tt.says)
			}
		})
	}
	t.Run("empty path", func(t *testing.T) {
		_, err := OpenSQLite(testContext(t), "")
		wantCode(t, err, tare.EINVALID)
	})
}

func TestOpenSQLiteOddPath(t *testing.T) {
	// '?' and '#' end a URI's path: the store must escape them.
	path := filepath.Join(t.TempDir(), "we?ird #dir", "tare.db")
	s, err := OpenSQLite(testContext(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCreate(t, s, newRun("r", base))
	if _, err := os.Stat(path); err != nil {
		t.Errorf("store not at %q: %v", path, err)
	}
}

func TestOpenPostgresErrors(t *testing.T) {
	ctx := testContext(t)
	tests := []struct {
		name string
		dsn  string
		code string
	}{
		{"bad DSN", "postgres://u:s3cret@127.0.0.1:notaport/db", tare.EINVALID},
		{"nothing listens", "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5", tare.EUNAVAILABLE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenPostgres(ctx, tt.dsn)
			if err == nil {
				s.Close()
				t.Fatal("OpenPostgres succeeded")
			}
			wantCode(t, err, tt.code)
			if msg := tare.ErrorMessage(err); strings.Contains(msg, "s3cret") {
				t.Errorf("message %q shows the password", msg)
			}
		})
	}
}

func TestMigrations(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		ms, err := loadMigrations(migrationFS, dialect)
		if err != nil || len(ms) == 0 {
			t.Fatalf("%s migrations: %d, %v", dialect, len(ms), err)
		}
	}
	bad := fstest.MapFS{
		"migrations/x/0001_a.sql": {Data: []byte("SELECT 1")},
		"migrations/x/0003_c.sql": {Data: []byte("SELECT 1")},
	}
	if _, err := loadMigrations(bad, "x"); !errors.Is(err, ErrMigration) {
		t.Errorf("a gap in versions: %v, want ErrMigration", err)
	}

	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		// Opening again applies nothing twice.
		s2, err := Open(ctx, s.dsn)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		s2.Close()
		var n int
		if err := s.c.b.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		want, _ := loadMigrations(migrationFS, "sqlite")
		if n != len(want) {
			t.Errorf("schema_migrations has %d rows, want %d", n, len(want))
		}

		// A store from a newer tare is refused, not damaged.
		if _, err := s.c.b.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)`); err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, s.dsn)
		wantCode(t, err, tare.EINVALID)
		if !strings.Contains(err.Error(), "newer") {
			t.Errorf("error %q should say the store is newer", err)
		}
	})
}

func TestParseMigrationName(t *testing.T) {
	tests := []struct {
		name string
		want int
		ok   bool
	}{
		{"0001_init.sql", 1, true},
		{"0012_ticks_index.sql", 12, true},
		{"init.sql", 0, false},
		{"_init.sql", 0, false},
		{"0000_zero.sql", 0, false},
		{"-001_neg.sql", 0, false},
		{"+001_plus.sql", 0, false},
		{"x1_init.sql", 0, false},
	}
	for _, tt := range tests {
		got, err := parseMigrationName(tt.name)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseMigrationName(%q) = %d, %v; want %d, ok %v", tt.name, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrMigration) {
			t.Errorf("parseMigrationName(%q) error %v does not wrap ErrMigration", tt.name, err)
		}
	}
}

func FuzzParseMigrationName(f *testing.F) {
	for _, s := range []string{"0001_init.sql", "12_x.sql", "_", "", "9999999999999999999999_x.sql", "+1_x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v, err := parseMigrationName(name)
		if err == nil && v <= 0 {
			t.Fatalf("parseMigrationName(%q) = %d without error", name, v)
		}
		if err != nil && !errors.Is(err, ErrMigration) {
			t.Fatalf("error %v does not wrap ErrMigration", err)
		}
	})
}

// The open of a store whose context is already cancelled fails, cleanly.
func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "tare.db")); err == nil {
		s.Close()
		t.Error("OpenSQLite with a cancelled context succeeded")
	}
}
