package main

// The container runtime: the fake CRI runtime of k8s.io/cri-client/pkg/fake (fake_runtime.go),
// served on a socket in the node root, with CreateContainer resolving the container's CDI devices
// the way containerd does (containerd internal/cri/server/container_create_linux.go, which calls
// pkg/oci WithCDIDevices, which calls the CDI cache's InjectDevices and fails the container when a
// device does not resolve). The fake runtime keeps container configs to itself, so what each
// container got is recorded as <root>/containers/<container id>.json for draguard to read.
//
// A stop reaches the node's device truth before StopContainer returns. draguard's device-truth feed
// (harness/kubelet/feed.py) acknowledges each container it told the truth as started with a marker
// <root>/containers/<container id>.truth, and removes the marker once it told the truth the stop.
// StopContainer and RemoveContainer mark the record not running, then wait for that marker to go:
// the kubelet unprepares a pod's claims as soon as StopContainer returned for its containers
// (k8s.io/kubernetes pkg/kubelet/kubelet.go, SyncTerminatingPod), and a real container's processes
// are gone from the device by then, so the truth must be too (else the driver's reset sees a process
// on the device). With no feed (a driver without device truth) no marker is written and nothing waits.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// ContainerRecord is what <root>/containers/<id>.json holds.
type ContainerRecord struct {
	ID           string   `json:"id"`
	PodName      string   `json:"podName"`
	PodNamespace string   `json:"podNamespace"`
	PodUID       string   `json:"podUID"`
	Container    string   `json:"container"`
	CDIDevices   []string `json:"cdiDevices"`
	Env          []string `json:"env"`
	Running      bool     `json:"running"`
}

// truthWait bounds how long a stop waits for the feed. The feed looks at the containers folder every
// 0.1 s, so it answers within a few tenths of a second; the bound only matters when the feed is gone
// (its kubelet being stopped). It stays well inside the deadline the kubelet gives the call: the CRI
// client's StopContainer allows its request timeout plus the grace period (k8s.io/cri-client
// pkg/remote_runtime.go, StopContainer: "timeout + default timeout"), that is the 15 s this kubelet
// builds its runtime client with (main.go) plus at least minimumGracePeriodInSeconds = 2 s
// (pkg/kubelet/kuberuntime/kuberuntime_manager.go); RemoveContainer has the 15 s alone.
const truthWait = 5 * time.Second

// truthPoll is how often a waiting stop looks for the feed's acknowledgement.
const truthPoll = 10 * time.Millisecond

type cdiRuntime struct {
	*fakeremote.RemoteRuntime
	cdiDir     string
	recordDir  string
	socketPath string
	server     *grpc.Server
	mu         sync.Mutex
	truthWait  time.Duration
}

// startRuntime serves the fake runtime's CRI services on <root>/cri.sock (kubemark uses a random
// /tmp path from fake.GenerateEndpoint).
func startRuntime(root, cdiDir string) (*cdiRuntime, error) {
	r := &cdiRuntime{
		RemoteRuntime: fakeremote.NewFakeRemoteRuntime(),
		cdiDir:        cdiDir,
		recordDir:     filepath.Join(root, "containers"),
		socketPath:    filepath.Join(root, "cri.sock"),
		server:        grpc.NewServer(),
		truthWait:     truthWait,
	}
	if err := os.MkdirAll(r.recordDir, 0o755); err != nil {
		return nil, err
	}
	// The fake runtime keeps its containers in memory: those a previous process recorded are gone
	// (the restarted kubelet creates its pods' containers again), and so are their acknowledgements.
	if err := clearRecords(r.recordDir); err != nil {
		return nil, err
	}
	_ = os.Remove(r.socketPath)
	listener, err := net.Listen("unix", r.socketPath)
	if err != nil {
		return nil, fmt.Errorf("fake runtime socket %s: %w", r.socketPath, err)
	}
	kubeapi.RegisterRuntimeServiceServer(r.server, r)
	kubeapi.RegisterImageServiceServer(r.server, r.RemoteRuntime)
	// As fake.RemoteRuntime.Start does: the runtime and its network report ready.
	r.RuntimeService.FakeStatus = &kubeapi.RuntimeStatus{Conditions: []*kubeapi.RuntimeCondition{
		{Type: kubeapi.RuntimeReady, Status: true},
		{Type: kubeapi.NetworkReady, Status: true},
	}}
	go func() { _ = r.server.Serve(listener) }()
	return r, nil
}

func (r *cdiRuntime) Endpoint() string { return "unix://" + r.socketPath }

// Stop stops serving and removes the socket.
func (r *cdiRuntime) Stop() {
	r.server.Stop()
	_ = os.Remove(r.socketPath)
}

// resolveCDI injects the named devices into an empty OCI spec with the CDI library, reading the
// spec directory afresh each time (containerd refreshes its CDI cache on spec changes).
func resolveCDI(cdiDir string, names []string) (*oci.Spec, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(cdiDir), cdi.WithAutoRefresh(false))
	if err != nil {
		// Spec files that do not parse are reported here, but the rest are usable; containerd
		// logs such errors and goes on, and so does this.
		klog.InfoS("CDI spec directory has errors", "dir", cdiDir, "err", err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, names...); err != nil {
		return nil, fmt.Errorf("CDI device injection failed: %w", err)
	}
	return spec, nil
}

// CreateContainer resolves the CDI devices, then creates the container in the fake runtime.
func (r *cdiRuntime) CreateContainer(ctx context.Context, req *kubeapi.CreateContainerRequest) (*kubeapi.CreateContainerResponse, error) {
	var names []string
	for _, d := range req.GetConfig().GetCDIDevices() {
		names = append(names, d.GetName())
	}
	var env []string
	if len(names) > 0 {
		spec, err := resolveCDI(r.cdiDir, names)
		if err != nil {
			klog.InfoS("CreateContainer failed", "pod", req.GetSandboxConfig().GetMetadata().GetName(),
				"container", req.GetConfig().GetMetadata().GetName(), "err", err)
			return nil, grpcstatus.Error(codes.Unknown, err.Error())
		}
		env = spec.Process.Env
	}
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	meta := req.GetSandboxConfig().GetMetadata()
	rec := ContainerRecord{
		ID: resp.GetContainerId(), PodName: meta.GetName(), PodNamespace: meta.GetNamespace(), PodUID: meta.GetUid(),
		Container: req.GetConfig().GetMetadata().GetName(), CDIDevices: names, Env: env,
	}
	if rec.CDIDevices == nil {
		rec.CDIDevices = []string{}
	}
	if rec.Env == nil {
		rec.Env = []string{}
	}
	if err := r.writeRecord(rec); err != nil {
		return nil, grpcstatus.Error(codes.Internal, err.Error())
	}
	return resp, nil
}

func (r *cdiRuntime) StartContainer(ctx context.Context, req *kubeapi.StartContainerRequest) (*kubeapi.StartContainerResponse, error) {
	resp, err := r.RemoteRuntime.StartContainer(ctx, req)
	if err == nil {
		r.setRunning(req.GetContainerId(), true)
	}
	return resp, err
}

// StopContainer stops the container, then waits until the device truth knows (see truthWait).
func (r *cdiRuntime) StopContainer(ctx context.Context, req *kubeapi.StopContainerRequest) (*kubeapi.StopContainerResponse, error) {
	resp, err := r.RemoteRuntime.StopContainer(ctx, req)
	if err == nil {
		r.setRunning(req.GetContainerId(), false)
		r.waitForTruth(ctx, req.GetContainerId())
	}
	return resp, err
}

// RemoveContainer removes the container and its record; a container removed while it runs (the
// CRI allows it: containerd stops it first) leaves the device truth first, as in StopContainer.
func (r *cdiRuntime) RemoveContainer(ctx context.Context, req *kubeapi.RemoveContainerRequest) (*kubeapi.RemoveContainerResponse, error) {
	resp, err := r.RemoteRuntime.RemoveContainer(ctx, req)
	if err == nil {
		id := req.GetContainerId()
		r.setRunning(id, false)
		r.waitForTruth(ctx, id)
		r.mu.Lock()
		_ = os.Remove(r.recordPath(id))
		_ = os.Remove(r.markerPath(id))
		r.mu.Unlock()
	}
	return resp, err
}

// waitForTruth waits, at most r.truthWait, until the feed's acknowledgement of the container is gone.
// The record was marked not running before this looks: the feed writes the marker before it tells
// the truth a start and checks the record again after, so either this sees the marker or the feed
// sees the record not running and tells nothing.
func (r *cdiRuntime) waitForTruth(ctx context.Context, id string) {
	start := time.Now()
	deadline := start.Add(r.truthWait)
	for waited := false; ; waited = true {
		if _, err := os.Stat(r.markerPath(id)); os.IsNotExist(err) {
			if waited {
				klog.V(2).InfoS("the device truth has the container stopped", "id", id, "waited", time.Since(start))
			}
			return
		}
		if !time.Now().Before(deadline) {
			klog.InfoS("the device truth feed did not acknowledge the container's stop; going on", "id", id, "waited", r.truthWait)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(truthPoll):
		}
	}
}

func (r *cdiRuntime) recordPath(id string) string {
	return filepath.Join(r.recordDir, filepath.Base(id)+".json")
}

// markerPath is the feed's acknowledgement that the device truth has the container as running.
func (r *cdiRuntime) markerPath(id string) string {
	return filepath.Join(r.recordDir, filepath.Base(id)+".truth")
}

// clearRecords removes the records and acknowledgements a previous runtime left in dir.
func clearRecords(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".truth") || strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}

func (r *cdiRuntime) writeRecord(rec ContainerRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return writeJSON(r.recordPath(rec.ID), rec)
}

func (r *cdiRuntime) setRunning(id string, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := os.ReadFile(r.recordPath(id))
	if err != nil {
		return
	}
	var rec ContainerRecord
	if json.Unmarshal(data, &rec) != nil {
		return
	}
	rec.Running = running
	if err := writeJSON(r.recordPath(id), rec); err != nil {
		klog.ErrorS(err, "cannot record container state", "id", id)
	}
}

// writeJSON writes atomically (temp file and rename), so readers never see half a record.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
