// Command echo is the loopback HTTP server tare's benchmarks load: it answers
// every request with a short body and prints its address on stdout.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("echo: listen %s: %v", *listen, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Fatalf("echo: %s is not a loopback address: benchmarks load loopback only", ln.Addr())
	}
	fmt.Println(ln.Addr())
	body := []byte("ok\n")
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })))
}
