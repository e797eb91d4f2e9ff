package schedprobe

// The connection tracer's object is built from bpf/connect.bpf.c by
// bpf2go with Debian's clang and libbpf-dev, and committed, as the
// probe's is.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel,bpfeb -type tcp_connect -type unix_connect -type seen connect bpf/connect.bpf.c
