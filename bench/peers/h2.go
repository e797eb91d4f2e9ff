package main

// The HTTP/2 row: tare --http2 against h2load (Debian's nghttp2-client),
// each on CPU 0 at the fixed rate, against one HTTP/2-over-TLS server of
// its own (Go's net/http, with a certificate of a CA it makes at start)
// on CPU 1. The server is this program run again, told so by the
// environment (h2Role), so the row needs no other file.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// h2Role, in the environment, runs this program as the row's server
// ("server DIR": its CA's certificate written to DIR/ca.pem, its address
// printed); "row" measures the HTTP/2 row alone, the flags as for the
// whole table:
//
//	TARE_PEERS_H2=row go run ./bench/peers -rounds 3
const h2Role = "TARE_PEERS_H2"

func init() {
	role := strings.Fields(os.Getenv(h2Role))
	switch {
	case len(role) == 1 && role[0] == "row":
		log.SetFlags(0)
		log.SetPrefix("peers: ")
		flag.Parse()
		dir, err := os.MkdirTemp("", "tare-peers")
		if err != nil {
			log.Fatal(err)
		}
		h2Row(build(dir, "tare", "./cmd/tare"), dir)
		os.RemoveAll(dir)
		os.Exit(0)
	case len(role) == 2 && role[0] == "server":
		h2Server(role[1])
		os.Exit(0)
	}
}

// h2Row measures the HTTP/2 row and prints it with tare's ratios.
func h2Row(tare, dir string) {
	self, err := os.Executable()
	if err != nil {
		log.Printf("h2 row left out: %v", err)
		return
	}
	server := exec.Command("taskset", "-c", "1", self)
	server.Env = append(os.Environ(), h2Role+"=server "+dir)
	// Gone with this program, even when a failed run ends it (log.Fatalf
	// runs no deferred kill).
	server.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := server.StdoutPipe()
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		log.Printf("h2 row left out: start its server: %v", err)
		return
	}
	defer func() {
		server.Process.Kill()
		server.Wait()
	}()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		log.Printf("h2 row left out: its server's address: %v", err)
		return
	}
	url := "https://" + strings.TrimSpace(addr) + "/"
	ca := filepath.Join(dir, "ca.pem")

	tools := []tool{h2Tare("tare", tare, url, ca, "goroutines"), h2Tare("tare-loop", tare, url, ca, "loop")}
	if h2load := debTool("h2load", "nghttp2-client"); h2load != "" {
		tools = append(tools, h2loadTool(h2load, url, dir))
	}
	fmt.Printf("\nHTTP/2 over TLS (Go net/http h2 server on CPU 1), %d/s × %d, medians of %d rounds:\n", *fixedRate, *fixedJobs, *rounds)
	order, results := measure(tools)
	printTable(order, results)
	if loop, goroutines := results["tare-loop"], results["tare"]; loop.cpuPer10k > 0 && goroutines.cpuPer10k > 0 {
		fmt.Printf("%-20s %22s %22s %22s\n", "tare-loop vs tare", "n/a", ratio(loop.cpuPer10k, goroutines.cpuPer10k), ratio(loop.lagP99MS, goroutines.lagP99MS))
	}
}

// h2Tare is tare --http2 at the fixed rate, HTTP/2 sent by engine
// (--h2-engine).
func h2Tare(name, tare, url, ca, engine string) tool {
	return tool{
		name:    name,
		highest: func() float64 { return math.NaN() },
		fixed: func() (float64, float64) {
			out, cpu := run(tare, "run", "--url", url, "--http2", "--h2-engine", engine, "--cacert", ca, "--rate", fmt.Sprintf("%d/s", *fixedRate), "--arrival", "constant",
				"--jobs", strconv.Itoa(*fixedJobs), "--max-inflight", strconv.Itoa(*conns), "--no-store", "--quiet", "--json")
			s := summary(out)
			if p, _ := s["generator"].(map[string]any)["protocols"].(map[string]any); p["h2"] == nil || len(p) != 1 {
				log.Fatalf("%s spoke %v, not h2 alone", name, p)
			}
			if d := s["requests"].(map[string]any)["dropped"].(float64); d > 0 {
				log.Printf("%s: %.0f arrivals dropped at --max-inflight %d (connections %v)", name, d, *conns, s["generator"].(map[string]any)["protocols"])
			}
			return perTenK(cpu), s["send_lag_ms"].(map[string]any)["p99"].(float64)
		},
		note: "--http2 --h2-engine " + engine + ", --max-inflight " + strconv.Itoa(*conns),
	}
}

// h2loadTool runs h2load on one connection (-c 1, up to -m streams) at
// the fixed rate (--rps; its --timing-script-file, a time for every
// request, fell behind here: 10,000 requests of a 5 s script took 16 s).
// Its log gives each request's start, from which the send lag is taken
// as vegeta's is (vegetaLagP99): against the schedule started at the
// earliest start minus its offset. --rps sends what is due on a timer's
// ticks, so its lag shows those ticks.
func h2loadTool(h2load, url, dir string) tool {
	logFile := filepath.Join(dir, "h2load.log")
	return tool{
		name:    "h2load",
		highest: func() float64 { return math.NaN() },
		fixed: func() (float64, float64) {
			os.Remove(logFile) // h2load appends to it
			out, cpu := run(h2load, "--rps="+strconv.Itoa(*fixedRate), "-n", strconv.Itoa(*fixedJobs), "-c", "1", "-m", strconv.Itoa(*conns),
				"--log-file="+logFile, url)
			if !strings.Contains(string(out), fmt.Sprintf("%d succeeded", *fixedJobs)) {
				log.Fatalf("h2load did not succeed %d requests:\n%s", *fixedJobs, out)
			}
			if m := regexp.MustCompile(`finished in [^,]*`).Find(out); m != nil {
				log.Printf("h2load: %s (the schedule lasts %s)", m, time.Duration(*fixedJobs)*time.Second/time.Duration(*fixedRate))
			}
			return perTenK(cpu), h2loadLagP99(logFile)
		},
		note: "-c 1 -m " + strconv.Itoa(*conns) + " --rps at the fixed rate",
	}
}

// h2loadLagP99 is the send-lag p99 of an h2load log: each line's first
// field is a request's start in microseconds since the epoch. The lines
// are in the order the responses ended; one client sends its requests in
// turn, so the starts sorted are the schedule's requests in turn.
func h2loadLagP99(path string) float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatalf("h2load log: %v", err)
	}
	var starts []float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		start, err := strconv.ParseFloat(strings.Fields(line)[0], 64)
		if err != nil {
			log.Fatalf("h2load log line %q: %v", line, err)
		}
		starts = append(starts, start)
	}
	slices.Sort(starts)
	gap := 1e6 / float64(*fixedRate)
	lags := make([]float64, len(starts))
	for i, start := range starts {
		lags[i] = start - float64(i)*gap
	}
	t0 := lags[0]
	for _, l := range lags {
		t0 = math.Min(t0, l)
	}
	for i := range lags {
		lags[i] = (lags[i] - t0) / 1e3
	}
	return percentile(lags, 0.99)
}

// h2Server serves HTTP/2 over TLS on loopback with a certificate of a CA
// made here, writes the CA to dir/ca.pem and prints its address.
func h2Server(dir string) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "peers CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		log.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, key.Public(), caKey)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	body := []byte("ok\n")
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		Protocols: protos,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	fmt.Println(ln.Addr())
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
