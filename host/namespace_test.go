package host

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadLocalAddrs: a namespace's own addresses, from a capture of one
// with a veth (10.231.9.2/24, fd00:9::2/64) and a local route for a
// whole prefix (ip route add local 10.99.0.0/24 dev lo): each once,
// though fib_trie lists them in two tables; a neighbour on the veth's
// subnet, and its broadcast address, are not its own.
func TestReadLocalAddrs(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fib_trie", "if_inet6"} {
		b, err := os.ReadFile(filepath.Join("testdata", "net", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "net", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := readLocalAddrs(dir)
	want := localAddrs{
		netip.MustParsePrefix("10.99.0.0/24"), netip.MustParsePrefix("10.231.9.2/32"),
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("fe80::2c37:62ff:fe4a:df8f/128"), netip.MustParsePrefix("fd00:9::2/128"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fe80::14f7:f5ff:fe2e:a4b/128"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("local addresses %v; want %v", got, want)
	}
	for _, c := range []struct {
		addr string
		own  bool
	}{
		{"10.231.9.2", true}, {"10.99.0.77", true}, {"127.1.2.3", true}, {"fd00:9::2", true}, {"::ffff:10.231.9.2", true},
		{"10.231.9.1", false}, {"10.231.9.255", false}, {"fd00:9::1", false}, {"192.0.2.2", false},
	} {
		if got.has(netip.MustParseAddr(c.addr)) != c.own {
			t.Errorf("has(%s) = %v; want %v", c.addr, !c.own, c.own)
		}
	}
	if none := readLocalAddrs(t.TempDir()); len(none) != 0 {
		t.Errorf("local addresses of a namespace without its files: %v; want none", none)
	}
}

// TestParseLocalAddrsErrors: a malformed line is ErrParse, quoting it.
func TestParseLocalAddrsErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		parse func([]byte, localAddrs) (localAddrs, error)
		in    string
	}{
		{"fib_trie leaf not an address", parseFibTrie, "Main:\n     |-- 10.0.0.x\n        /32 host LOCAL\n"},
		{"fib_trie IPv6 leaf", parseFibTrie, "     |-- ::1\n        /32 host LOCAL\n"},
		{"fib_trie route before a leaf", parseFibTrie, "Local:\n        /32 host LOCAL\n"},
		{"fib_trie prefix too long", parseFibTrie, "     |-- 10.0.0.1\n        /33 host LOCAL\n"},
		{"fib_trie prefix not a number", parseFibTrie, "     |-- 10.0.0.1\n        /x host LOCAL\n"},
		{"if_inet6 short address", parseIfInet6, "0000000000000000000000000000001 01 80 10 80 lo\n"},
		{"if_inet6 not hex", parseIfInet6, "0000000000000000000000000000000g 01 80 10 80 lo\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.parse([]byte(c.in), nil); !errors.Is(err, ErrParse) {
				t.Errorf("error %v; want ErrParse", err)
			}
		})
	}
}

// FuzzParseFibTrie: parseFibTrie never panics, fails only with ErrParse,
// and what it accepts are IPv4 prefixes, each once.
func FuzzParseFibTrie(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "net", "fib_trie"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("     |-- 10.0.0.1\n        /32 host LOCAL\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseFibTrie(b, nil)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		for i, p := range got {
			if !p.Addr().Is4() || !p.IsValid() || slices.Contains(got[:i], p) {
				t.Fatalf("prefixes %v: %v is not an IPv4 prefix met once", got, p)
			}
		}
	})
}

// FuzzParseIfInet6: parseIfInet6 never panics, fails only with ErrParse,
// and gives a /128 a line.
func FuzzParseIfInet6(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "net", "if_inet6"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("00000000000000000000000000000001 01 80 10 80       lo\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseIfInet6(b, nil)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		for _, p := range got {
			if p.Bits() != 128 || !p.Addr().Is6() {
				t.Fatalf("prefixes %v: %v is not an IPv6 /128", got, p)
			}
		}
	})
}

// TestExists: a process is in the table when its directory is; a pid of 0
// or below never is.
func TestExists(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		root string
		pid  int
		want bool
	}{
		{root, 42, true},
		{root, 43, false},
		{root, 0, false},
		{root, -1, false},
		{"", os.Getpid(), true}, // DefaultProcRoot
	} {
		if got := Exists(tt.root, tt.pid); got != tt.want {
			t.Errorf("Exists(%q, %d) = %v, want %v", tt.root, tt.pid, got, tt.want)
		}
	}
}
