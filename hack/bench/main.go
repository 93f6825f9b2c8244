// Command bench runs cluster-mapper's benchmark (test/bench): etcd, a source kube-apiserver and
// mapper-apiserver from the testenv, a data set assigned to locations, and scenarios 1-11 side
// by side with kube-apiserver where there is an equivalent (test/bench/run.go lists them). It
// writes RESULTS.md, results.json and profiles/ into --out; `--scenarios=8` (or another subset
// of the preset's scenarios) runs those alone and merges them into the report already in --out.
//
// `make bench` runs the default preset (the design scale, under 30 minutes on 2 cores);
// `make bench-quick` the quick one (about 5 minutes); `make bench-large` the large one (250k
// objects: start-up and memory only, into bench/large). Flags override single parameters of the
// preset; see -help.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cluster-mapper/cluster-mapper/test/bench"
	"github.com/cluster-mapper/cluster-mapper/test/framework/programtb"
)

func main() {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	cfg, err := bench.ParseFlags(fs, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tb, err := programtb.New("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer tb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "bench: interrupted; stopping every process it started")
		cancel()
		tb.Close()
		os.Exit(130)
	}()
	command := "bench " + strings.Join(os.Args[1:], " ")
	if c := os.Getenv("BENCH_COMMAND"); c != "" {
		command = c
	}
	bench.Run(ctx, tb, cfg, command)
}
