// go-smb2 load peer for benchmarks/smb_client_cpu.py: GOROUTINES goroutines over one
// connection (go-smb2 multiplexes them by message ID), each doing one op after another
// for SECONDS; prints {"client", "op", "ops", "ops_per_s"} as JSON. go-smb2 has no echo.
//
//	gosmb2 ADDR SHARE USER PASSWORD getattr|read4k GOROUTINES SECONDS
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hirochachacha/go-smb2"
)

func main() {
	if len(os.Args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: gosmb2 ADDR SHARE USER PASSWORD getattr|read4k GOROUTINES SECONDS")
		os.Exit(2)
	}
	addr, share, user, password, op := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	workers, _ := strconv.Atoi(os.Args[6])
	seconds, _ := strconv.ParseFloat(os.Args[7], 64)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	check(err)
	d := &smb2.Dialer{Initiator: &smb2.NTLMInitiator{User: user, Password: password}}
	s, err := d.Dial(conn)
	check(err)
	fs, err := s.Mount(share)
	check(err)
	f, err := fs.Open("probe.dat")
	check(err)
	var ops, failed atomic.Int64
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for time.Now().Before(deadline) {
				var err error
				if op == "getattr" {
					_, err = fs.Stat("probe.dat")
				} else {
					_, err = f.ReadAt(buf, 0)
				}
				if err != nil {
					failed.Add(1)
				} else {
					ops.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	if failed.Load() > 0 {
		fmt.Fprintf(os.Stderr, "%d ops failed\n", failed.Load())
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]any{"client": "go-smb2", "op": op, "ops": ops.Load(), "ops_per_s": float64(ops.Load()) / took})
	fmt.Println(string(out))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
