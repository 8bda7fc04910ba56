package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const specJSON = `{"cdiVersion": "0.6.0", "kind": "gpu.example.com/gpu",
 "devices": [{"name": "claim-uid-gpu-0", "containerEdits": {"env": ["GPU=gpu-0"]}}]}`

func startTestRuntime(t *testing.T) (*cdiRuntime, string) {
	t.Helper()
	root := t.TempDir()
	cdiDir := filepath.Join(root, "cdi")
	if err := os.MkdirAll(cdiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := startRuntime(root, cdiDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r, cdiDir
}

func createRequest(t *testing.T, r *cdiRuntime, devices ...string) *kubeapi.CreateContainerRequest {
	t.Helper()
	sandbox := &kubeapi.PodSandboxConfig{Metadata: &kubeapi.PodSandboxMetadata{Name: "pod", Namespace: "ns", Uid: "pod-uid"}}
	resp, err := r.RunPodSandbox(context.Background(), &kubeapi.RunPodSandboxRequest{Config: sandbox})
	if err != nil {
		t.Fatal(err)
	}
	config := &kubeapi.ContainerConfig{Metadata: &kubeapi.ContainerMetadata{Name: "c"}, Image: &kubeapi.ImageSpec{Image: "busybox"}}
	for _, d := range devices {
		config.CDIDevices = append(config.CDIDevices, &kubeapi.CDIDevice{Name: d})
	}
	return &kubeapi.CreateContainerRequest{PodSandboxId: resp.PodSandboxId, Config: config, SandboxConfig: sandbox}
}

func TestCreateContainerResolvesAndRecordsCDIDevices(t *testing.T) {
	r, cdiDir := startTestRuntime(t)
	if err := os.WriteFile(filepath.Join(cdiDir, "gpu.json"), []byte(specJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := r.CreateContainer(context.Background(), createRequest(t, r, testCDI))
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	data, err := os.ReadFile(r.recordPath(resp.ContainerId))
	if err != nil {
		t.Fatal(err)
	}
	var rec ContainerRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.PodUID != "pod-uid" || len(rec.CDIDevices) != 1 || rec.CDIDevices[0] != testCDI {
		t.Fatalf("record %+v", rec)
	}
	if !strings.Contains(strings.Join(rec.Env, " "), "GPU=gpu-0") {
		t.Fatalf("the device's edits were not applied: env %v", rec.Env)
	}
	if _, err := r.StartContainer(context.Background(), &kubeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RemoveContainer(context.Background(), &kubeapi.RemoveContainerRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.recordPath(resp.ContainerId)); !os.IsNotExist(err) {
		t.Fatalf("record of a removed container remains: %v", err)
	}
}

func TestCreateContainerFailsOnUnresolvableCDIDevice(t *testing.T) {
	r, cdiDir := startTestRuntime(t)
	if err := os.WriteFile(filepath.Join(cdiDir, "gpu.json"), []byte(specJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := r.CreateContainer(context.Background(), createRequest(t, r, testDriver+"/gpu=claim-uid-gpu-1"))
	if err == nil || !strings.Contains(err.Error(), "unresolvable CDI devices") {
		t.Fatalf("CreateContainer with an unknown device: %v", err)
	}
	containers, _ := r.RuntimeService.ListContainers(context.Background(), nil)
	if len(containers) != 0 {
		t.Fatalf("the failed container exists: %v", containers)
	}
}

func TestStopRemovesTheSocket(t *testing.T) {
	r, _ := startTestRuntime(t)
	if _, err := os.Stat(r.socketPath); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if _, err := os.Stat(r.socketPath); !os.IsNotExist(err) {
		t.Fatalf("socket remains after Stop: %v", err)
	}
}

// startedContainer creates and starts a container with the test device and returns its id.
func startedContainer(t *testing.T, r *cdiRuntime, cdiDir string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cdiDir, "gpu.json"), []byte(specJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := r.CreateContainer(context.Background(), createRequest(t, r, testCDI))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.StartContainer(context.Background(), &kubeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Fatal(err)
	}
	return resp.ContainerId
}

func readRecord(t *testing.T, r *cdiRuntime, id string) ContainerRecord {
	t.Helper()
	data, err := os.ReadFile(r.recordPath(id))
	if err != nil {
		t.Fatal(err)
	}
	var rec ContainerRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// acknowledged starts a runtime whose stops wait at most wait, and a container on it that the
// device-truth feed has acknowledged (its marker written, as the feed does once it told the truth).
func acknowledged(t *testing.T, wait time.Duration) (*cdiRuntime, string, string) {
	t.Helper()
	r, cdiDir := startTestRuntime(t)
	r.truthWait = wait
	id := startedContainer(t, r, cdiDir)
	if err := os.WriteFile(r.markerPath(id), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return r, cdiDir, id
}

func TestStopWithoutAFeedMarkerReturnsAtOnce(t *testing.T) {
	r, cdiDir := startTestRuntime(t)
	r.truthWait = time.Hour // a wait would hang the test: none must happen
	id := startedContainer(t, r, cdiDir)
	if _, err := r.StopContainer(context.Background(), &kubeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if readRecord(t, r, id).Running {
		t.Fatal("the stopped container's record still says running")
	}
}

func TestStopWaitsUntilTheFeedRemovesItsMarker(t *testing.T) {
	r, _, id := acknowledged(t, time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := r.StopContainer(context.Background(), &kubeapi.StopContainerRequest{ContainerId: id})
		done <- err
	}()
	// As the feed: it sees the record turn not running, and only then may the call return.
	for readRecord(t, r, id).Running {
		select {
		case err := <-done:
			t.Fatalf("StopContainer returned (%v) before the record said not running", err)
		case <-time.After(truthPoll):
		}
	}
	select {
	case err := <-done:
		t.Fatalf("StopContainer returned (%v) while the feed's marker was still there", err)
	default:
	}
	if err := os.Remove(r.markerPath(id)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStopGoesOnWhenTheFeedNeverAnswers(t *testing.T) {
	r, _, id := acknowledged(t, 50*time.Millisecond) // the feed is gone (its kubelet stopping): the bound lets the stop go on
	if _, err := r.StopContainer(context.Background(), &kubeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if readRecord(t, r, id).Running {
		t.Fatal("the stopped container's record still says running")
	}
}

func TestRemovingARunningContainerWaitsForTheFeedThenDropsRecordAndMarker(t *testing.T) {
	r, _, id := acknowledged(t, time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := r.RemoveContainer(context.Background(), &kubeapi.RemoveContainerRequest{ContainerId: id})
		done <- err
	}()
	for readRecord(t, r, id).Running {
		time.Sleep(truthPoll)
	}
	select {
	case err := <-done:
		t.Fatalf("RemoveContainer returned (%v) while the feed's marker was still there", err)
	default:
	}
	if err := os.Remove(r.markerPath(id)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.recordPath(id)); !os.IsNotExist(err) {
		t.Fatalf("record of a removed container remains: %v", err)
	}
}

func TestARestartedRuntimeDropsTheRecordsAndMarkersOfTheLastOne(t *testing.T) {
	r, cdiDir, _ := acknowledged(t, truthWait)
	r.Stop()
	root := filepath.Dir(r.recordDir)
	again, err := startRuntime(root, cdiDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Stop)
	left, err := os.ReadDir(again.recordDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("a fresh runtime, whose containers are all gone, kept %d files of the last one", len(left))
	}
}
