// Command warmpod-pools is the pool controller: it sizes the warm pools of
// one namespace by their warmpod.dev/policy annotation and their measured
// demand, within one idle budget (package pools). It runs in the cluster
// as a Deployment of two replicas; one is the leader through a
// coordination.k8s.io Lease, the other waits to take over. It serves
// Prometheus metrics on /metrics and its health on /healthz. See
// the "Sizing pools" section of docs/guides/gitlab-runner.md and deploy/pools-controller.yaml.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/warmpod/warmpod/internal/flagenv"
	"github.com/warmpod/warmpod/internal/kubeclient"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
	"github.com/warmpod/warmpod/pools/offer"
	"github.com/warmpod/warmpod/sizing"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: warmpod-pools [flags]        (run the controller)
       warmpod-pools [flags] check [FILE | -]   (check a pool policy, or with no FILE every pool's of the namespace)
       warmpod-pools [flags] status             (every pool of the namespace: pods, target, why, what it expects)
       warmpod-pools version
flags (each also as WARMPOD_POOLS_<NAME>):`

func main() { os.Exit(run(os.Args[1:])) }

// options is the command line once parsed.
type options struct {
	kubeconfig, namespace, identity, lease, metricsAddr string
	budgetPods                                          int
	budgetCPU, budgetMemory                             string
	resync, leaseDuration, renewDeadline, retryPeriod   time.Duration
	qps                                                 float64
	burst                                               int
	leaderElect, discoverPools                          bool
}

func parseFlags(args []string) (options, []string, error) {
	var o options
	fs := flag.NewFlagSet("warmpod-pools", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the pools (default: the kubeconfig context's, or the pod's own)")
	fs.IntVar(&o.budgetPods, "budget-pods", 0, "the most idle pods of all pools of the namespace together (0: no limit)")
	fs.StringVar(&o.budgetCPU, "budget-cpu", "", "the most CPU the idle pods may request together, a quantity such as 4 or 2500m (empty: no limit)")
	fs.StringVar(&o.budgetMemory, "budget-memory", "", "the most memory the idle pods may request together, a quantity such as 8Gi (empty: no limit)")
	fs.BoolVar(&o.discoverPools, "discover-pools", false, "make a pool from the default pool for an image whose jobs went cold without one 3 times within a day, and remove it after a week without a claim (needs create and delete on deployments)")
	fs.DurationVar(&o.resync, "resync", pools.DefaultResync, "longest time between two decisions without an event: the lag behind a period's start or an idle_time's end")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":9090", "address of /metrics, /healthz, the drivers' offers of idle pods (/v1/offer) and the leader's recent claims (/v1/claims) (empty: none)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "hold a coordination.k8s.io Lease so that one replica sizes pools at a time")
	fs.StringVar(&o.lease, "lease-name", "warmpod-pools", "name of the Lease, in --namespace")
	fs.StringVar(&o.identity, "identity", "", "this replica's name in the Lease (default: $POD_NAME, else the host name)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "how long a leader that stopped renewing keeps the Lease: the longest takeover")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "how long the leader retries renewing before it stops sizing and exits")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	fs.Float64Var(&o.qps, "kube-api-qps", 20, "the most requests per second to the API server (client-go's limiter): the hard bound on the controller's writes")
	fs.IntVar(&o.burst, "kube-api-burst", 40, "requests allowed at once above --kube-api-qps")
	if err := flagenv.Parse(fs, args, "WARMPOD_POOLS_", "warmpod-pools"); err != nil {
		return o, nil, err
	}
	if err := commandNamedAsValue(fs); err != nil {
		return o, nil, err
	}
	return o, fs.Args(), nil
}

// commands are warmpod-pools' subcommands; none runs the controller.
var commands = []string{"check", "status", "version"}

// commandNamedAsValue refuses a flag whose value is a command's name, given
// without one: `warmpod-pools --namespace status` is a forgotten value, and
// would start the controller in namespace "status".
func commandNamedAsValue(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return nil
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(commands, f.Value.String()) {
			err = fmt.Errorf("--%s %s: a value that names a command; give --%s its value (--%s=VALUE) and the command after the flags: warmpod-pools [flags] %s", f.Name, f.Value, f.Name, f.Name, f.Value)
		}
	})
	return err
}

// command checks rest (what follows the flags) as a command line: a
// known command, its own arguments, no flag after it. Errors name the word
// and the fix; "" with no error runs the controller.
func command(rest []string) (string, error) {
	if len(rest) == 0 {
		return "", nil
	}
	name := rest[0]
	if name == "true" || name == "false" {
		return "", fmt.Errorf("unexpected argument %q: a bool flag takes its value after = (--leader-elect=%s)", name, name)
	}
	if !slices.Contains(commands, name) {
		hint := "the commands are " + strings.Join(commands, ", ") + ", after the flags (-h lists them)"
		for _, c := range commands {
			if editDistance(name, c) <= 2 {
				hint = "did you mean " + c + "?"
			}
		}
		return "", fmt.Errorf("unknown command %q: %s", name, hint)
	}
	for _, a := range rest[1:] {
		if len(a) > 1 && strings.HasPrefix(a, "-") {
			return "", fmt.Errorf("%s: flag %s after the command; flags come before it: warmpod-pools %s … %s", name, a, a, name)
		}
	}
	if name == "version" && len(rest) > 1 {
		return "", fmt.Errorf("version takes no argument; got %q", rest[1])
	}
	return name, nil
}

// editDistance is the Levenshtein distance of a and b (bytes), for the
// hint of a mistyped command.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// validate refuses values the controller cannot run with, naming the flag
// and the range, before anything connects: client-go's leader election
// panics on a Lease duration not above the renew deadline, or a renew
// deadline not above 1.2 retry periods (its JitterFactor), and its rate
// limiter on a QPS or burst that allows nothing.
func (o options) validate() error {
	switch {
	case o.resync <= 0:
		return fmt.Errorf("--resync %v: must be above 0 (e.g. 10s)", o.resync)
	case o.qps <= 0:
		return fmt.Errorf("--kube-api-qps %v: must be above 0 (e.g. 20)", o.qps)
	case o.burst < 1:
		return fmt.Errorf("--kube-api-burst %d: must be 1 or more (e.g. 40)", o.burst)
	case o.metricsAddr != "" && !validAddr(o.metricsAddr):
		return fmt.Errorf("--metrics-addr %q: not HOST:PORT or :PORT (e.g. :9090), nor empty for none", o.metricsAddr)
	case !o.leaderElect:
		return nil
	case o.retryPeriod <= 0:
		return fmt.Errorf("--retry-period %v: must be above 0 (e.g. 2s)", o.retryPeriod)
	case float64(o.renewDeadline) <= leaderelection.JitterFactor*float64(o.retryPeriod):
		return fmt.Errorf("--renew-deadline %v: must be above %v × --retry-period (%v), client-go's leader election's jitter", o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod)
	case o.leaseDuration <= o.renewDeadline:
		return fmt.Errorf("--lease-duration %v: must be above --renew-deadline (%v): a leader gives up renewing before its Lease lapses", o.leaseDuration, o.renewDeadline)
	}
	return nil
}

// validAddr reports whether addr is a listen address: HOST:PORT or
// :PORT with a port number.
func validAddr(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// budget is the namespace's budget from the flags. Errors name the flag.
func (o options) budget() (sizing.Budget, error) {
	b := sizing.Budget{Pods: o.budgetPods}
	if o.budgetPods < 0 {
		return b, fmt.Errorf("--budget-pods %d: must be 0 (no limit) or more", o.budgetPods)
	}
	for _, q := range []struct {
		flag, v string
		out     *int64
		milli   bool
	}{{"--budget-cpu", o.budgetCPU, &b.MilliCPU, true}, {"--budget-memory", o.budgetMemory, &b.MemoryBytes, false}} {
		if q.v == "" {
			continue
		}
		r, err := resource.ParseQuantity(q.v)
		if err != nil || r.Sign() <= 0 {
			return b, fmt.Errorf("%s %q: not a quantity above zero (like 4, 2500m, 8Gi)", q.flag, q.v)
		}
		if q.milli {
			*q.out = r.MilliValue()
		} else {
			*q.out = r.Value()
		}
	}
	return b, nil
}

func run(args []string) int {
	o, rest, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-pools:", err)
		return 2
	}
	cmd, err := command(rest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-pools:", err)
		return 2
	}
	switch cmd {
	case "version":
		fmt.Println("warmpod-pools", version)
		return 0
	case "check":
		return check(context.Background(), o, rest[1:], os.Stdin, os.Stdout, os.Stderr)
	case "status":
		return status(context.Background(), o, rest[1:], os.Stdout, os.Stderr)
	}
	budget, err := o.budget()
	if err == nil {
		err = o.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod-pools:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, o, budget, log); err != nil {
		log.Error("warmpod-pools stopped", "err", err)
		return 1
	}
	return 0
}

// serve wires the client, the metrics server, the Event recorder and the
// leader election, and runs the controller while it leads.
func serve(ctx context.Context, o options, budget sizing.Budget, log *slog.Logger) error {
	cl, err := kubeclient.New(o.kubeconfig, o.namespace, "warmpod-pools/"+version)
	if err != nil {
		return err
	}
	rc := *cl.Config
	rc.QPS, rc.Burst = float32(o.qps), o.burst
	cs, err := kubernetes.NewForConfig(&rc)
	if err != nil {
		return err
	}
	if err := reachable(ctx, cs, rc.Host, startTimeout); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := pools.NewMetrics(reg)
	if err != nil {
		return err
	}
	// leading is the controller while this replica leads: ClaimsPath
	// serves its recent claims (warmpod-pools status reads them there).
	var leading atomic.Pointer[pools.Controller]
	if o.metricsAddr != "" {
		// Every replica offers idle pods to the drivers' claims, leader
		// or not (package offer): a claim should not wait for a takeover.
		offers, err := offer.New(cs, cl.Namespace, clock.RealClock{}, reg)
		if err != nil {
			return err
		}
		if err := serveMetrics(ctx, o.metricsAddr, reg, offers, pools.ClaimsHandler(leading.Load), log); err != nil {
			return err
		}
		go func() {
			if err := offers.Start(ctx); err != nil && ctx.Err() == nil {
				log.Error("offers", "err", err)
			}
		}()
	}
	bc := record.NewBroadcaster(record.WithContext(ctx))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(cl.Namespace)})
	defer bc.Shutdown()
	rec := bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "warmpod-pools"})
	cfg := pools.Config{Namespace: cl.Namespace, Budget: budget, Resync: o.resync}
	if o.discoverPools {
		cfg.Discovery = sizing.DefaultDiscovery()
	}
	lead := func(ctx context.Context) error {
		m.SetLeader(true)
		defer m.SetLeader(false)
		c := pools.New(cs, cfg, log, clock.RealClock{}, rec, m)
		leading.Store(c)
		defer leading.Store(nil)
		return c.Run(ctx)
	}
	if !o.leaderElect {
		return lead(ctx)
	}
	return elect(ctx, o, cs, cl.Namespace, rec, log, lead)
}

// startTimeout bounds how long the controller tries to reach the API
// server at start before it exits 1: long enough for a pod whose network
// comes up a little after it starts, short enough that a wrong address
// shows as a crash-looping pod, not as a healthy one that never sizes
// anything (client-go's informers would retry forever while /healthz
// answers ok).
const startTimeout = 30 * time.Second

// reachable asks the API server at host for its version, once a second,
// until it answers or within has passed. Errors name host.
func reachable(ctx context.Context, cs kubernetes.Interface, host string, within time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, within, true, func(context.Context) (bool, error) {
		_, last = cs.Discovery().ServerVersion()
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("cannot reach the API server at %s within %v: %w", host, within, last)
	}
	return err
}

// elect runs lead while this replica holds the Lease. Losing the Lease
// ends the process with an error (the Deployment restarts it as a
// follower): a controller that may be acting on a stale view must stop at
// once, as Kubernetes' own controllers do.
func elect(ctx context.Context, o options, cs kubernetes.Interface, ns string, rec record.EventRecorder,
	log *slog.Logger, lead func(context.Context) error) error {
	id := o.identity
	if id == "" {
		id = os.Getenv("POD_NAME")
	}
	if id == "" {
		id, _ = os.Hostname()
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, o.lease, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: rec})
	if err != nil {
		return err
	}
	var runErr error
	lost := false
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: o.lease,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading: sizing pools", "identity", id, "lease", ns+"/"+o.lease)
				runErr = lead(ctx)
			},
			OnStoppedLeading: func() { lost = ctx.Err() == nil },
			OnNewLeader: func(who string) {
				if who != id {
					log.Info("following", "leader", who)
				}
			},
		},
	})
	if lost {
		return errors.Join(errors.New("lost the Lease"), runErr)
	}
	return runErr
}

// serveMetrics serves /metrics, /healthz, the drivers' offers
// (poolapi.OfferPath) and the leader's recent claims (pools.ClaimsPath) on
// addr until ctx ends.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, offers, claims http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle(poolapi.OfferPath, offers)
	mux.Handle(pools.ClaimsPath, claims)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return nil
}
