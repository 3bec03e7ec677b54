// Command testproc is the supervisor's test subject: a process that speaks
// the protocol (event log, /healthz and /crashpoints on a fixed control
// address, crash points) with nothing else to depend on.
//
//	GET /hit/{name}  calls the crash point's Hit (kill never answers; pause
//	                 answers after SIGCONT)
//
//	POST /exit/{code} writes "testproc exiting with status CODE" to stderr
//	                 and exits with it at once (never answers)
//
// --fail MSG writes MSG to stderr and exits 3 before serving anything;
// --once FILE creates FILE, or, if it exists (a later incarnation), fails
// like --fail;
// --ready-after D waits D before serving anything;
// --unhealthy-for D makes /healthz answer 503 for D after serving starts;
// --ready-line TEXT prints TEXT on stdout once serving;
// --listen-tcp ADDR accepts (and closes) TCP connections on ADDR once serving;
// --ignore-term ignores SIGTERM and SIGINT so a stop has to escalate to SIGKILL.
//
// On SIGTERM or SIGINT it logs a "stopping" line (Detail: the signal) to its
// event log, prints "testproc stopping on SIGNAL" and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/faultline-dev/faultline/protocol/control"
	"github.com/faultline-dev/faultline/protocol/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

func main() {
	eventLog := flag.String("event-log", "", "event log path (empty: stderr)")
	addr := flag.String("control-addr", "127.0.0.1:0", "control address")
	pointList := flag.String("points", "relay.after-claim,relay.after-confirm", "crash points to serve, comma separated")
	fail := flag.String("fail", "", "write this to stderr and exit 3 before becoming ready")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM and SIGINT")
	readyLine := flag.String("ready-line", "", "print this line on stdout once serving")
	listenTCP := flag.String("listen-tcp", "", "accept TCP connections here once serving")
	readyAfter := flag.Duration("ready-after", 0, "wait this long before serving")
	once := flag.String("once", "", "run only if this file does not exist yet, and create it")
	unhealthyFor := flag.Duration("unhealthy-for", 0, "answer /healthz 503 for this long after serving starts")
	flag.Parse()

	wd, _ := os.Getwd()
	fmt.Println("testproc starting, pid", os.Getpid(), "in", wd)
	if *once != "" {
		f, err := os.OpenFile(*once, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			*fail = "testproc runs once: " + err.Error()
		} else {
			_ = f.Close()
		}
	}
	if *fail != "" {
		fmt.Fprintln(os.Stderr, *fail)
		os.Exit(3)
	}

	sigs := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM, os.Interrupt)
	} else {
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	}

	log, err := eventlog.Open(*eventLog, "testproc")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Event(eventlog.Started, "")
	var names []string
	for _, n := range strings.Split(*pointList, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	points := crashpoint.NewSet("testproc", log, names...)
	if err := points.ArmFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	if *readyAfter > 0 {
		fmt.Println("testproc waiting", *readyAfter, "before serving")
		time.Sleep(*readyAfter)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healthyAt := time.Now().Add(*unhealthyFor)
	health := func(context.Context) error {
		if time.Now().Before(healthyAt) {
			return errors.New("warming up")
		}
		return nil
	}
	extra := map[string]http.Handler{
		"GET /hit/{name}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			points.Hit(r.PathValue("name"))
			_, _ = w.Write([]byte("passed\n"))
		}),
		"POST /exit/{code}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, err := strconv.Atoi(r.PathValue("code"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintln(os.Stderr, "testproc exiting with status", code)
			os.Exit(code)
		}),
	}
	bound, err := control.Serve(ctx, *addr, log, points, health, extra)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *listenTCP != "" {
		ln, err := net.Listen("tcp", *listenTCP)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
	}
	fmt.Println("testproc serving on", bound)
	if *readyLine != "" {
		fmt.Println(*readyLine)
	}

	sig := <-sigs // never, with --ignore-term
	log.Log(eventlog.Entry{Event: "stopping", Detail: sig.String()})
	fmt.Println("testproc stopping on", sig)
}
