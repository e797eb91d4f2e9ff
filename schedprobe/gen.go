package schedprobe

// The eBPF object is built from bpf/probe.bpf.c by bpf2go with Debian's clang
// and libbpf-dev (apt-get install clang llvm libbpf-dev), and committed:
// go build needs no C compiler. Run go generate ./schedprobe after
// changing the C source, and commit the four generated files.
//
// -mcpu=v3 for the atomic exchange of the inbox (Linux 5.12 and later).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel,bpfeb -type charge_key -type charge -type cpu_state -type watch -type waiter -type waits -type exit probe bpf/probe.bpf.c
