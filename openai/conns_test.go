package openai

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/modelsim"
)

// TestUnixSocket: a model served on a Unix socket is called through it,
// the URL's host sent as the Host header (as curl --unix-socket does);
// each call names its connection, counted as the server saw them.
func TestUnixSocket(t *testing.T) {
	sim, err := modelsim.New(modelsim.Config{TokenCost: 200 * time.Microsecond, MeanTokens: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hosts := map[string]int{}
	accepted := 0
	path := filepath.Join(t.TempDir(), "model.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts[r.Host]++
		mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			accepted++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()

	c := newClient(t, Config{URL: "http://model.invalid/v1", UnixSocket: path, MaxConns: 1})
	for i := range 5 {
		var res tare.Result
		c.Do(context.Background(), &res)
		if res.Err != "" || res.Status != 200 || res.OutputTokens != 4 || res.Conn == 0 {
			t.Fatalf("call %d: err %q status %d tokens %d conn %d; want 4 tokens over the socket", i, res.Err, res.Status, res.OutputTokens, res.Conn)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hosts["model.invalid"] != 5 {
		t.Errorf("the server got Host %v; want model.invalid 5 times", hosts)
	}
	if st := c.Conns().Stats(); st.Opened != int64(accepted) || st.Opened != 1 || st.Reused != 4 {
		t.Errorf("counted %+v; the server accepted %d: want one connection, reused 4 times", st, accepted)
	}
}
