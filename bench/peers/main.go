// Command peers measures tare against the load generators users would
// otherwise pick (wrk, hey, vegeta) in one run, on this machine, and prints
// each figure per tool and tare's ratio to each peer. Every tool runs
// pinned to CPU 0 against one loopback server pinned to CPU 1; every run is
// bounded in time.
//
//	go run ./bench/peers                 # the whole table (about 4 minutes)
//	go run ./bench/peers -max 5s -memory=false
//
// It installs what is missing: vegeta and hey with `go install` from the
// module proxy, wrk from Debian's packages when run as root. Where a C
// compiler is at hand it also prints the floor: bench/floor/floor.c, the
// CPU that one timer wake, one write, one wake and one read per request
// cost on this machine with no runtime and no HTTP parsing at all.
package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
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

var (
	maxFor    = flag.Duration("max", 10*time.Second, "length of each highest-rate run")
	fixedRate = flag.Int("rate", 2000, "the fixed rate, per second, of the CPU and send-lag runs")
	fixedJobs = flag.Int("jobs", 10000, "requests of each fixed-rate run")
	conns     = flag.Int("c", 64, "connections (workers, in-flight cap) every tool may use")
	memory    = flag.Bool("memory", true, "also measure tare's peak RSS over 1,000,000 requests")
	rounds    = flag.Int("rounds", 3, "fixed-rate runs of each tool, taking turns; the table shows their medians")
	twoCores  = flag.Bool("two", true, "also the highest rate of tare --engines 2 against wrk -t2, both on CPUs 0 and 1")
)

const (
	vegetaModule = "github.com/tsenart/vegeta/v12@v12.13.0"
	heyModule    = "github.com/rakyll/hey@v0.1.5"
)

// figures are one tool's results; NaN where a tool cannot measure a figure.
type figures struct {
	maxRate   float64 // requests per second at the highest rate, 10 s
	cpuPer10k float64 // CPU seconds per 10,000 requests at the fixed rate
	lagP99MS  float64 // send-lag (scheduling error) p99 at the fixed rate, ms
	note      string
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("peers: ")
	flag.Parse()
	dir, err := os.MkdirTemp("", "tare-peers")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	tare := build(dir, "tare", "./cmd/tare")
	echo := build(dir, "echo", "./bench/echo")
	vegeta, hey := goTool(dir, "vegeta", vegetaModule), goTool(dir, "hey", heyModule)
	wrk := debTool("wrk", "wrk")
	floor := buildFloor(dir)
	goFloor := build(dir, "gofloor", "./bench/gofloor")

	server := exec.Command("taskset", "-c", "1", echo)
	stdout, _ := server.StdoutPipe()
	if err := server.Start(); err != nil {
		log.Fatalf("start the loopback server: %v", err)
	}
	defer server.Process.Kill()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		log.Fatalf("read the server's address: %v", err)
	}
	url := "http://" + strings.TrimSpace(addr) + "/"
	log.Printf("server %s on CPU 1; every generator on CPU 0; %d connections; highest rate over %s; fixed %d/s × %d", url, *conns, *maxFor, *fixedRate, *fixedJobs)

	tools := []tool{tareTool(tare, url, "tare", "--no-store"), tareTool(tare, url, "tare+db", "--db", filepath.Join(dir, "runs.db"))}
	if vegeta != "" {
		tools = append(tools, vegetaTool(vegeta, url, dir))
	}
	if hey != "" {
		tools = append(tools, heyTool(hey, url))
	}
	if wrk != "" {
		tools = append(tools, wrkTool(wrk, url))
	}
	if floor != "" {
		tools = append(tools, floorTool("floor", floor, url, "C, one timerfd + epoll loop, no parsing: CPU per 10k only"))
	}
	tools = append(tools, floorTool("floor-go", goFloor, url, "the same loop in Go, through Go's poller as tare's engine: what the runtime costs"),
		floorTool("go-epoll", goFloor, url, "the same loop in Go outside Go's poller (own epoll, locked thread)", "-epoll"))
	order, results := measure(tools)
	printTable(order, results)
	if wrk != "" && *twoCores {
		twoEngines(tare, wrk, url)
	}
	h2Row(tare, dir)
	sampler()
	if *memory {
		flatMemory(tare, url)
	}
}

// run runs a command pinned to CPU 0 and returns its output and the CPU
// (user + system) it used.
func run(name string, args ...string) ([]byte, time.Duration) {
	return runOn("0", name, args...)
}

// runOn runs a command pinned to cpus (a taskset list).
func runOn(cpus, name string, args ...string) ([]byte, time.Duration) {
	cmd := exec.Command("taskset", append([]string{"-c", cpus, name}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		log.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.Bytes())
	}
	return out.Bytes(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// tool is one generator: its highest rate (NaN when it has none), and one
// run at the fixed rate giving its CPU per 10,000 requests and its send-lag
// p99 (NaN when it has no schedule to lag behind).
type tool struct {
	name    string
	highest func() float64
	fixed   func() (cpuPer10k, lagP99MS float64)
	note    string
}

// measure takes each tool's highest rate once, then its fixed-rate figures
// -rounds times, the tools taking turns so that the machine's moods fall on
// all of them alike, and keeps the medians.
func measure(tools []tool) ([]string, map[string]figures) {
	var order []string
	results := map[string]figures{}
	cpu, lag := map[string][]float64{}, map[string][]float64{}
	for _, t := range tools {
		order = append(order, t.name)
		results[t.name] = figures{maxRate: t.highest(), note: t.note}
	}
	for range *rounds {
		for _, t := range tools {
			c, l := t.fixed()
			cpu[t.name] = append(cpu[t.name], c)
			lag[t.name] = append(lag[t.name], l)
		}
	}
	for _, t := range tools {
		f := results[t.name]
		f.cpuPer10k, f.lagP99MS = median(cpu[t.name]), median(lag[t.name])
		results[t.name] = f
	}
	return order, results
}

func median(v []float64) float64 {
	if math.IsNaN(v[0]) {
		return v[0]
	}
	return percentile(v, 0.5)
}

func perTenK(cpu time.Duration) float64 { return cpu.Seconds() * 10000 / float64(*fixedJobs) }

// tareTool is tare with storeFlags: --no-store for the generator alone, or
// a SQLite store, which is what a user gets by default.
func tareTool(tare, url, name string, storeFlags ...string) tool {
	common := append([]string{"--max-inflight", strconv.Itoa(*conns), "--quiet", "--json"}, storeFlags...)
	t := tool{
		name: name,
		// The highest sustained open-loop rate: offered far above what can
		// be served, with the in-flight cap of the other tools; what is
		// achieved is what tare sustained.
		highest: func() float64 {
			out, _ := run(tare, append([]string{"run", "--url", url, "--rate", "100000/s", "--duration", maxFor.String()}, common...)...)
			return summary(out)["rate"].(map[string]any)["achieved_per_s"].(float64)
		},
		fixed: func() (float64, float64) {
			out, cpu := run(tare, append([]string{"run", "--url", url, "--rate", fmt.Sprintf("%d/s", *fixedRate), "--arrival", "constant",
				"--jobs", strconv.Itoa(*fixedJobs)}, common...)...)
			return perTenK(cpu), summary(out)["send_lag_ms"].(map[string]any)["p99"].(float64)
		},
	}
	if name != "tare" {
		// Offered far above capacity, the store keeps every dropped
		// arrival too: about 100,000 records a second.
		t.note = "tare with its default store (SQLite), every record kept, dropped arrivals included"
	}
	return t
}

func summary(out []byte) map[string]any {
	var s map[string]any
	if err := json.Unmarshal(out, &s); err != nil {
		log.Fatalf("tare summary: %v", err)
	}
	return s
}

func vegetaTool(vegeta, url, dir string) tool {
	results := filepath.Join(dir, "vegeta.bin")
	attack := func(rate string, d time.Duration) time.Duration {
		cmd := exec.Command("taskset", "-c", "0", vegeta, "attack", "-rate", rate, "-duration", d.String(),
			"-max-workers", strconv.Itoa(*conns), "-output", results)
		cmd.Stdin = strings.NewReader("GET " + url + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("vegeta attack: %v\n%s", err, out)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return tool{
		name: "vegeta",
		highest: func() float64 {
			attack("0", *maxFor)
			out, err := exec.Command(vegeta, "report", "-type", "json", results).Output()
			if err != nil {
				log.Fatalf("vegeta report: %v", err)
			}
			var rep struct{ Throughput float64 }
			json.Unmarshal(out, &rep)
			return rep.Throughput
		},
		fixed: func() (float64, float64) {
			d := time.Duration(float64(*fixedJobs) / float64(*fixedRate) * float64(time.Second))
			cpu := attack(fmt.Sprintf("%d/s", *fixedRate), d)
			return perTenK(cpu), vegetaLagP99(vegeta, results)
		},
	}
}

// vegetaLagP99 is the send-lag p99 of a vegeta results file: vegeta stamps
// each hit with its actual start and its sequence number, and its pacer
// meant hit i for t0 + i/rate. t0, its attack's start, is not in the file:
// it is taken as the earliest t_i - i/rate, so that the hit sent most on
// time has no lag. That understates every lag by that hit's, never more.
// (Hit 0's own start as t0 understated them by hit 0's lag, 0.7-0.8 ms
// here, and gave a negative median.)
func vegetaLagP99(vegeta, results string) float64 {
	enc, err := exec.Command(vegeta, "encode", "--to", "csv", results).Output()
	if err != nil {
		log.Fatalf("vegeta encode: %v", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(enc)).ReadAll()
	if err != nil {
		log.Fatalf("vegeta csv: %v", err)
	}
	gap := 1e9 / float64(*fixedRate)
	lags := make([]float64, 0, len(rows))
	for _, r := range rows {
		ts, _ := strconv.ParseInt(r[0], 10, 64)
		seq, _ := strconv.ParseInt(r[8], 10, 64)
		lags = append(lags, float64(ts)-float64(seq)*gap)
	}
	if len(lags) == 0 {
		log.Fatalf("vegeta results %s: no hits", results)
	}
	t0 := slices.Min(lags)
	for i := range lags {
		lags[i] = (lags[i] - t0) / 1e6
	}
	return percentile(lags, 0.99)
}

func heyTool(hey, url string) tool {
	return tool{
		name: "hey",
		highest: func() float64 {
			out, _ := run(hey, "-z", maxFor.String(), "-c", strconv.Itoa(*conns), url)
			return grab(out, `Requests/sec:\s+([0-9.]+)`)
		},
		// hey paces each worker closed-loop (-q per worker): the same total rate.
		fixed: func() (float64, float64) {
			workers := 4
			_, cpu := run(hey, "-n", strconv.Itoa(*fixedJobs), "-c", strconv.Itoa(workers), "-q", strconv.Itoa(*fixedRate/workers), url)
			return perTenK(cpu), math.NaN()
		},
		note: "closed loop: no schedule to lag behind",
	}
}

func wrkTool(wrk, url string) tool {
	var cpuAtFull float64
	return tool{
		name: "wrk",
		highest: func() float64 {
			out, cpu := run(wrk, "-t1", "-c"+strconv.Itoa(*conns), "-d"+strconv.Itoa(int(maxFor.Seconds()))+"s", url)
			rate := grab(out, `Requests/sec:\s+([0-9.]+)`)
			cpuAtFull = cpu.Seconds() * 10000 / (rate * maxFor.Seconds())
			return rate
		},
		// wrk cannot hold a fixed rate: its CPU per request at full speed.
		fixed: func() (float64, float64) { return cpuAtFull, math.NaN() },
		note:  "closed loop at full speed; CPU per 10k at its highest rate",
	}
}

// floorTool runs a floor at the fixed rate: bench/floor, the least CPU per
// request any generator could spend here, or bench/gofloor (with flags),
// the least a Go one could.
func floorTool(name, floor, url, note string, flags ...string) tool {
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	return tool{
		name:    name,
		highest: func() float64 { return math.NaN() },
		fixed: func() (float64, float64) {
			out, _ := run(floor, append(flags, addr, strconv.Itoa(*fixedRate), strconv.Itoa(*fixedJobs))...)
			return grab(out, `cpu_s ([0-9.]+)`) * 10000 / float64(*fixedJobs), math.NaN()
		},
		note: note,
	}
}

func buildFloor(dir string) string {
	cc, err := exec.LookPath("cc")
	if err != nil {
		log.Printf("floor left out: no C compiler (cc)")
		return ""
	}
	out := filepath.Join(dir, "floor")
	if b, err := exec.Command(cc, "-O2", "-o", out, "bench/floor/floor.c").CombinedOutput(); err != nil {
		log.Printf("floor left out: %v\n%s", err, b)
		return ""
	}
	return out
}

// printTable prints each tool's figures, then the ratio of each tare
// (alone, and with its store) to each peer.
func printTable(order []string, r map[string]figures) {
	fmt.Printf("\n%-8s %14s %18s %16s   %s\n", "tool", "highest rate/s", "CPU s / 10k req", "send-lag p99", "note")
	for _, name := range order {
		f := r[name]
		fmt.Printf("%-8s %14s %18.3f %16s   %s\n", name, rate(f.maxRate), f.cpuPer10k, ms(f.lagP99MS), f.note)
	}
	fmt.Printf("\n%-20s %22s %22s %22s\n", "", "highest rate (×, ↑)", "CPU per 10k (×, ↓)", "send-lag p99 (×, ↓)")
	for _, ours := range order {
		if !strings.HasPrefix(ours, "tare") {
			continue
		}
		t := r[ours]
		for _, name := range order {
			if strings.HasPrefix(name, "tare") {
				continue
			}
			f := r[name]
			fmt.Printf("%-20s %22s %22s %22s\n", ours+" vs "+name, ratio(t.maxRate, f.maxRate), ratio(t.cpuPer10k, f.cpuPer10k), ratio(t.lagP99MS, f.lagP99MS))
		}
	}
	// What the default store costs: tare with it against tare without.
	if db, alone := r["tare+db"], r["tare"]; alone.cpuPer10k > 0 && db.cpuPer10k > 0 {
		fmt.Printf("%-20s %22s %22s %22s\n", "tare+db vs tare", ratio(db.maxRate, alone.maxRate), ratio(db.cpuPer10k, alone.cpuPer10k), ratio(db.lagP99MS, alone.lagP99MS))
	}
}

// twoEngines compares the highest rate of two engines with wrk's two
// threads, -rounds times in turn, each on both CPUs. The server stays on
// CPU 1: with two CPUs there is none of its own left, so each generator
// shares CPU 1 with it alike.
func twoEngines(tare, wrk, url string) {
	secs := strconv.Itoa(int(maxFor.Seconds()))
	var ours, theirs, ratios []float64
	for range *rounds {
		out, _ := runOn("0,1", tare, "run", "--url", url, "--rate", "200000/s", "--duration", secs+"s", "--engines", "2",
			"--max-inflight", strconv.Itoa(*conns), "--no-store", "--quiet", "--json")
		t := summary(out)["rate"].(map[string]any)["achieved_per_s"].(float64)
		out, _ = runOn("0,1", wrk, "-t2", "-c"+strconv.Itoa(*conns), "-d"+secs+"s", url)
		w := grab(out, `Requests/sec:\s+([0-9.]+)`)
		ours, theirs, ratios = append(ours, t), append(theirs, w), append(ratios, t/w)
	}
	fmt.Printf("\ntwo engines on CPUs 0,1 (server on CPU 1), highest rate over %s, %d rounds in turn:\n", *maxFor, *rounds)
	fmt.Printf("  tare --engines 2 %s/s, wrk -t2 %s/s, ratio per round %s, median %.2f\n",
		join(ours, "%.0f"), join(theirs, "%.0f"), join(ratios, "%.2f"), median(slices.Clone(ratios)))
}

func join(v []float64, format string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, " ")
}

// sampler reports the host sampler's cost per reading, from its benchmark.
func sampler() {
	out, err := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkSample$", "-benchtime", "300x", "./host").CombinedOutput()
	if err != nil {
		log.Printf("host sampler benchmark: %v\n%s", err, out)
		return
	}
	ns := grab(out, `BenchmarkSample\S*\s+\d+\s+([0-9.]+) ns/op`)
	fmt.Printf("\nhost sampler: %.0f µs a reading: %.3f%% of one core at 1 s ticks, %.3f%% at 100 ms\n", ns/1e3, ns/1e9*100, ns/1e8*100)
}

// flatMemory reports tare's peak RSS over 1,000,000 requests beside
// 100,000: memory must not grow with the run.
func flatMemory(tare, url string) {
	rss := func(jobs int) float64 {
		cmd := exec.Command("taskset", "-c", "0", tare, "run", "--url", url, "--rate", "40000/s", "--jobs", strconv.Itoa(jobs),
			"--max-inflight", "512", "--no-store", "--quiet", "--json")
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("tare run for memory: %v\n%s", err, out)
		}
		return float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
	}
	small, large := rss(100_000), rss(1_000_000)
	fmt.Printf("tare peak RSS: %.1f MB over 100,000 requests, %.1f MB over 1,000,000 (%.2f×)\n", small, large, large/small)
}

func build(dir, name, pkg string) string {
	out := filepath.Join(dir, name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		log.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// goTool finds a peer on PATH or installs it with go install into dir.
func goTool(dir, name, module string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	cmd := exec.Command("go", "install", module)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Printf("%s left out: go install %s: %v\n%s", name, module, err, out)
		return ""
	}
	return filepath.Join(dir, name)
}

// debTool finds a peer on PATH or installs its Debian package as root.
func debTool(name, pkg string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("apt-get", "install", "-y", "-qq", pkg).CombinedOutput(); err != nil {
			log.Printf("%s left out: apt-get install %s: %v\n%s", name, pkg, err, out)
			return ""
		}
		return name
	}
	log.Printf("%s left out: not installed (apt-get install %s)", name, pkg)
	return ""
}

func grab(out []byte, pattern string) float64 {
	m := regexp.MustCompile(pattern).FindSubmatch(out)
	if m == nil {
		log.Fatalf("no %q in:\n%s", pattern, out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func percentile(v []float64, q float64) float64 {
	slices.Sort(v)
	return v[int(q*float64(len(v)-1))]
}

func ms(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.3fms", v)
}

func rate(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}
