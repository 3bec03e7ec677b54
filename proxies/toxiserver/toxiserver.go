// Package toxiserver makes every binary that links it a Toxiproxy server on
// demand. A process started with Marker=1 in its environment runs
// toxiproxy v2.5.0's server in-process from this package's init, with the
// API on the -host and -port its command line gives and the log level of
// LOG_LEVEL, and exits when the server ends: it never reaches the binary's
// own main, nor a test binary's tests. Without the marker init does
// nothing.
//
// proxies.StartServer starts the running binary again this way
// (proxies.SelfServer), so the faultline CLI and every test binary that
// links package proxies carry the server: nothing is built, and no Go
// toolchain is needed, at run time. The server is a process of its own
// because its ApiServer.Listen blocks, exits the process through
// logger.Fatal when it cannot listen, and has no Shutdown.
package toxiserver

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
)

// Marker is the environment variable that makes a process a Toxiproxy
// server when it is "1".
const Marker = "FAULTLINE_TOXIPROXY_SERVER"

// init runs before any main and before testing parses its flags; the
// packages the server uses are initialised before this one, as its
// dependencies.
func init() {
	if os.Getenv(Marker) != "1" {
		return
	}
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the server as toxiproxy's own cmd/server does, with the API on
// -host (default 127.0.0.1) and -port (required): its log lines, zerolog
// JSON, go to stdout at the level LOG_LEVEL names (every level when it is
// unset; an unknown one is logged, then every level). It returns 2 on a bad
// command line, 0 on SIGTERM; when the API cannot listen the server's
// logger.Fatal exits the process with 1. Main changes zerolog's global
// settings as that cmd/server does: call it only in a process of its own.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toxiproxy-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1", "host for the API to listen on")
	port := fs.String("port", "", "port for the API to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toxiproxy-server: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if _, err := strconv.ParseUint(*port, 10, 16); err != nil {
		fmt.Fprintf(stderr, "toxiproxy-server: -port %q: want a port number\n", *port)
		return 2
	}

	// SIGTERM ends the server cleanly, as in toxiproxy's cmd/server.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	go func() {
		<-signals
		os.Exit(0)
	}()

	logger := newLogger(stdout)
	// Some toxics (bandwidth) log through zerolog's global logger.
	log.Logger = logger
	// math/rand's global source, which toxicity rolls use, is seeded at
	// random by the runtime.
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	server.Listen(*host, *port) // blocks; exits the process when it fails
	return 1
}

// newLogger is toxiproxy cmd/server's logger: UTC timestamps, the caller as
// file:line, the level from LOG_LEVEL.
func newLogger(out io.Writer) zerolog.Logger {
	zerolog.TimestampFunc = func() time.Time { return time.Now().UTC() }
	zerolog.CallerMarshalFunc = func(_ uintptr, file string, line int) string {
		for i := len(file) - 1; i > 0; i-- {
			if file[i] == '/' {
				file = file[i+1:]
				break
			}
		}
		return file + ":" + strconv.Itoa(line)
	}
	logger := zerolog.New(out).With().Caller().Timestamp().Logger()
	val, ok := os.LookupEnv("LOG_LEVEL")
	if !ok {
		return logger
	}
	lvl, err := zerolog.ParseLevel(val)
	if err != nil {
		logger.Err(err).Msgf("unknown LOG_LEVEL value: %q", val)
		return logger
	}
	return logger.Level(lvl)
}
