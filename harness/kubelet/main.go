// Command draguard-kubelet runs one hollow kubelet with the real DRA manager for a draguard node.
//
// It is the kubemark hollow node (k8s.io/kubernetes/cmd/kubemark/app/hollow_node.go, "kubelet" morph)
// with three changes: the container manager delegates DRA to pkg/kubelet/cm/dra (see cm.go), the
// fake CRI runtime enforces CDI (see runtime.go), and everything a real node keeps under
// /var/lib/kubelet lives under --root-dir, which is the node root that draguard's drivers already
// use (plugins_registry/, plugins/<driver>/, cdi/).
//
// Exit codes: 0 after SIGTERM/SIGINT, 2 for bad flags or a start-up failure (the reason is the last
// line on stderr).
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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	kubeletoptions "k8s.io/kubernetes/cmd/kubelet/app/options"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubemark"
)

type options struct {
	nodeName     string
	rootDir      string
	kubeconfig   string
	cdiDir       string
	port         int
	healthzPort  int
	maxPods      int
	featureGates string
	nodeLabels   string
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("draguard-kubelet", flag.ContinueOnError)
	fs.StringVar(&o.nodeName, "node-name", "", "name of the Node this kubelet registers (required)")
	fs.StringVar(&o.rootDir, "root-dir", "", "the node root: kubelet root directory, plugins_registry/, plugins/ (required)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with the node's system:node:<name> credentials (required)")
	fs.StringVar(&o.cdiDir, "cdi-dir", "", "CDI spec directory the runtime resolves devices against (default <root-dir>/cdi)")
	fs.IntVar(&o.port, "port", 0, "kubelet server port on 127.0.0.1 (required)")
	fs.IntVar(&o.healthzPort, "healthz-port", 0, "kubelet healthz port on 127.0.0.1 (required)")
	fs.IntVar(&o.maxPods, "max-pods", 110, "pods this node accepts")
	fs.StringVar(&o.featureGates, "feature-gates", "", "comma-separated Gate=true|false, applied to the kubelet")
	fs.StringVar(&o.nodeLabels, "node-labels", "", "comma-separated key=value labels for the Node")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var missing []string
	for name, empty := range map[string]bool{
		"--node-name": o.nodeName == "", "--root-dir": o.rootDir == "", "--kubeconfig": o.kubeconfig == "",
		"--port": o.port == 0, "--healthz-port": o.healthzPort == 0,
	} {
		if empty {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required flags: %s", strings.Join(missing, ", "))
	}
	if o.cdiDir == "" {
		o.cdiDir = filepath.Join(o.rootDir, "cdi")
	}
	return o, nil
}

func parseMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func parseGates(s string) (map[string]bool, error) {
	m, err := parseMap(s)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for k, v := range m {
		switch v {
		case "true":
			out[k] = true
		case "false":
			out[k] = false
		default:
			return nil, fmt.Errorf("feature gate %s=%q: want true or false", k, v)
		}
	}
	return out, nil
}

// checkWritable fails early, naming the directory, when the node root cannot be written.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("root directory %s is not usable: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".writable-")
	if err != nil {
		return fmt.Errorf("root directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "draguard-kubelet: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "draguard-kubelet: %v\n", err)
		os.Exit(2)
	}
	klog.Flush()
}

// run mirrors the "kubelet" morph of k8s.io/kubernetes/cmd/kubemark/app/hollow_node.go (run).
func run(ctx context.Context, o *options) error {
	root, err := filepath.Abs(o.rootDir)
	if err != nil {
		return err
	}
	if err := checkWritable(root); err != nil {
		return err
	}
	gates, err := parseGates(o.featureGates)
	if err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	labels, err := parseMap(o.nodeLabels)
	if err != nil {
		return fmt.Errorf("--node-labels: %w", err)
	}
	// kubemark calls RunKubelet directly, which skips the feature-gate set-up of cmd/kubelet/app/server.go (Run).
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}

	clientConfig, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
	}
	clientConfig.UserAgent = "draguard-kubelet"
	clientConfig.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := clientset.NewForConfig(clientConfig)
	if err != nil {
		return err
	}

	flags, config := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName: o.nodeName, KubeletPort: o.port, MaxPods: o.maxPods, NodeLabels: labels,
	})
	// GetHollowKubeletConfig makes a temporary root; everything goes under the node root instead.
	_ = os.RemoveAll(flags.RootDirectory)
	flags.RootDirectory = root
	flags.CertDirectory = filepath.Join(root, "pki")
	config.StaticPodPath = filepath.Join(root, "static-pods")
	config.PodLogsDir = filepath.Join(root, "pod-logs")
	for _, d := range []string{config.StaticPodPath, config.PodLogsDir, o.cdiDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	config.Address = "127.0.0.1"
	config.HealthzBindAddress = "127.0.0.1"
	config.HealthzPort = int32(o.healthzPort) // served below: RunKubelet leaves healthz to its caller
	config.ReadOnlyPort = 0
	config.FeatureGates = gates

	heartbeatConfig := *clientConfig
	heartbeatConfig.Timeout = config.NodeStatusUpdateFrequency.Duration
	if lease := time.Duration(config.NodeLeaseDurationSeconds) * time.Second; heartbeatConfig.Timeout > lease {
		heartbeatConfig.Timeout = lease
	}
	heartbeatConfig.QPS = -1
	heartbeatClient, err := clientset.NewForConfig(&heartbeatConfig)
	if err != nil {
		return err
	}

	runtime, err := startRuntime(root, o.cdiDir)
	if err != nil {
		return err
	}
	defer runtime.Stop()
	runtimeService, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(runtime.Endpoint()).
		WithConnectionTimeout(15 * time.Second).
		Build(ctx)
	if err != nil {
		return fmt.Errorf("fake runtime: %w", err)
	}

	containerManager, err := newDRAContainerManager(klog.FromContext(ctx), client, root)
	if err != nil {
		return fmt.Errorf("DRA manager: %w", err)
	}
	hollow := kubemark.NewHollowKubelet(flags, config, client, heartbeatClient,
		&cadvisortest.Fake{NodeName: o.nodeName}, runtime.ImageService, runtimeService, containerManager)
	// HollowKubelet.Run (pkg/kubemark/hollow_kubelet.go) blocks forever and exits fatally on error;
	// RunKubelet itself returns once the kubelet runs in the background.
	if err := kubeletapp.RunKubelet(ctx, &kubeletoptions.KubeletServer{
		KubeletFlags: *hollow.KubeletFlags, KubeletConfiguration: *hollow.KubeletConfiguration,
	}, hollow.KubeletDeps); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	// cmd/kubelet/app/server.go (run) serves healthz itself; RunKubelet does not, so this does, once
	// the kubelet runs.
	healthz := &http.Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.healthzPort)), Handler: http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	listener, err := net.Listen("tcp", healthz.Addr)
	if err != nil {
		return fmt.Errorf("healthz port: %w", err)
	}
	go func() { _ = healthz.Serve(listener) }()
	defer func() { _ = healthz.Close() }()
	klog.InfoS("hollow DRA kubelet running", "node", o.nodeName, "root", root)
	<-ctx.Done()
	klog.InfoS("stopping", "node", o.nodeName)
	return nil
}
