// Command testproc is the supervisor's test subject: a process shaped like
// the pipeline's programs (event log, control line, /healthz, crash points)
// with nothing else to depend on.
//
//	GET /hit/{name}  calls the crash point's Hit (kill never answers; pause
//	                 answers after SIGCONT)
//
// --fail MSG writes MSG to stderr and exits 3 before the control line;
// --ignore-term ignores SIGTERM so a stop has to escalate to SIGKILL.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/faultline-dev/faultline/protocol/control"
	"faultline/system/crashpoint"
	"github.com/faultline-dev/faultline/protocol/eventlog"
)

func main() {
	eventLog := flag.String("event-log", "", "event log path")
	addr := flag.String("control-addr", "127.0.0.1:0", "control address")
	listen := flag.String("listen", "", "control address (as the order service names it)")
	kind := flag.String("kind", "relay", "whose crash points to serve")
	fail := flag.String("fail", "", "write this to stderr and exit 3 before becoming ready")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	flag.Parse()
	if *listen != "" {
		*addr = *listen
	}

	fmt.Println("testproc starting, pid", os.Getpid())
	if *fail != "" {
		fmt.Fprintln(os.Stderr, *fail)
		os.Exit(3)
	}
	log, err := eventlog.Open(*eventLog, "testproc")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Event(eventlog.Started, "")
	points := crashpoint.NewSet(*kind, log)
	if err := points.ArmFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	extra := map[string]http.Handler{
		"GET /hit/{name}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			points.Hit(r.PathValue("name"))
			_, _ = w.Write([]byte("passed\n"))
		}),
	}
	bound, err := control.Serve(ctx, *addr, log, points, nil, extra)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("testproc ready on", bound)
	<-ctx.Done()
	log.Log(eventlog.Entry{Event: "stopping"})
	fmt.Println("testproc stopping")
}
