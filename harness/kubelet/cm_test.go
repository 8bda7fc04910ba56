package main

// One test per delegated DRA method of draContainerManager (cm.go). Each drives the real DRA
// manager (pkg/kubelet/cm/dra) through the wrapper and checks a result only that manager produces:
// its checkpoint, its claim-info cache, its error for an unregistered driver.

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	pluginwatcherapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/state"
	"k8s.io/kubernetes/pkg/kubelet/config"
)

const (
	testDriver = "gpu.example.com"
	testCDI    = testDriver + "/gpu=claim-uid-gpu-0"
)

// testPod uses claim "claim" in namespace "ns" from container "c".
func testPod() *v1.Pod {
	name := "claim"
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns", UID: "pod-uid"},
		Spec: v1.PodSpec{
			NodeName:       "node",
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}},
			Containers: []v1.Container{{
				Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c"}}},
	}
}

// preparedState is the checkpoint of a kubelet that prepared testPod's claim.
func preparedState() state.ClaimInfoStateList {
	return state.ClaimInfoStateList{{
		ClaimUID: "claim-uid", ClaimName: "claim", Namespace: "ns", PodUIDs: sets.New("pod-uid"),
		DriverState: map[string]state.DriverState{testDriver: {Devices: []state.Device{{
			PoolName: "node", DeviceName: "gpu-0", RequestNames: []string{"req"}, CDIDeviceIDs: []string{testCDI},
		}}}},
	}}
}

func newTestManager(t *testing.T, checkpoint state.ClaimInfoStateList, objects ...metav1.Object) (*draContainerManager, string) {
	t.Helper()
	dir := t.TempDir()
	if checkpoint != nil {
		cp, err := state.NewCheckpointer(dir, "dra_manager_state")
		if err != nil {
			t.Fatal(err)
		}
		data, err := state.NewCheckpoint(checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Store(data); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset()
	for _, o := range objects {
		if c, ok := o.(*resourceapi.ResourceClaim); ok {
			if _, err := client.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := newDRAContainerManager(klog.Background(), client, dir)
	if err != nil {
		t.Fatal(err)
	}
	start(t, m)
	return m, dir
}

func start(t *testing.T, m *draContainerManager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node"}}
	err := m.Start(ctx, node, func() []*v1.Pod { return nil }, func(context.Context) (*v1.Node, error) { return node, nil },
		config.NewSourcesReady(func(sets.Set[string]) bool { return true }), nil, nil, false)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func TestStartStartsTheDRAManager(t *testing.T) {
	m, _ := newTestManager(t, nil) // started by newTestManager
	// The DRA manager's Start creates its plugin manager, which then validates registrations.
	handler := m.GetPluginRegistrationHandlers()[pluginwatcherapi.DRAPlugin]
	if err := handler.ValidatePlugin(context.Background(), testDriver, "/nonexistent.sock", []string{"v1.DRAPlugin"}); err != nil {
		t.Fatalf("a started manager rejects a valid v1 registration: %v", err)
	}
}

func TestGetPluginRegistrationHandlersIncludesDRA(t *testing.T) {
	m, _ := newTestManager(t, nil)
	handlers := m.GetPluginRegistrationHandlers()
	handler, ok := handlers[pluginwatcherapi.DRAPlugin]
	if !ok {
		t.Fatalf("no %s handler in %v", pluginwatcherapi.DRAPlugin, handlers)
	}
	// The real handler refuses a plugin that speaks no DRA service version it knows.
	err := handler.ValidatePlugin(context.Background(), testDriver, "/nonexistent.sock", []string{"v0.NoSuchService"})
	if err == nil {
		t.Fatal("the DRA handler accepted a plugin with no supported service")
	}
}

func TestGetResourcesReturnsCDIDevicesOfPreparedClaims(t *testing.T) {
	m, _ := newTestManager(t, preparedState())
	pod := testPod()
	opts, err := m.GetResources(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatalf("GetResources: %v", err)
	}
	if len(opts.CDIDevices) != 1 || opts.CDIDevices[0].Name != testCDI {
		t.Fatalf("CDI devices %v, want [%s]", opts.CDIDevices, testCDI)
	}
	// A claim the manager never prepared is an error, not an empty list.
	fresh, _ := newTestManager(t, nil)
	if _, err := fresh.GetResources(context.Background(), pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("GetResources of an unprepared claim succeeded")
	}
}

func TestGetDynamicResourcesReportsClaimDevices(t *testing.T) {
	m, _ := newTestManager(t, preparedState())
	pod := testPod()
	got := m.GetDynamicResources(klog.Background(), pod, &pod.Spec.Containers[0])
	if len(got) != 1 || got[0].ClaimName != "claim" || got[0].ClaimNamespace != "ns" {
		t.Fatalf("dynamic resources %v", got)
	}
	res := got[0].ClaimResources
	if len(res) != 1 || res[0].DriverName != testDriver || res[0].DeviceName != "gpu-0" || res[0].PoolName != "node" ||
		len(res[0].CdiDevices) != 1 || res[0].CdiDevices[0].Name != testCDI {
		t.Fatalf("claim resources %v", res)
	}
}

func TestPrepareDynamicResourcesNeedsARegisteredDriver(t *testing.T) {
	pod := testPod()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns", UID: "claim-uid"},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req", Driver: testDriver, Pool: "node", Device: "gpu-0"}},
			}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod", UID: types.UID("pod-uid")}},
		},
	}
	m, _ := newTestManager(t, nil, claim)
	err := m.PrepareDynamicResources(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), testDriver) || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("PrepareDynamicResources without the driver: %v", err)
	}
	// A claim that is missing from the API server is an error too.
	missing, _ := newTestManager(t, nil)
	if err := missing.PrepareDynamicResources(context.Background(), pod); err == nil {
		t.Fatal("PrepareDynamicResources of a missing claim succeeded")
	}
}

func TestUnprepareDynamicResourcesNeedsARegisteredDriver(t *testing.T) {
	m, _ := newTestManager(t, preparedState())
	err := m.UnprepareDynamicResources(context.Background(), testPod())
	if err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("UnprepareDynamicResources without the driver: %v", err)
	}
	if !m.PodMightNeedToUnprepareResources("pod-uid") {
		t.Fatal("a failed unprepare dropped the pod's reference")
	}
}

func TestPodMightNeedToUnprepareResourcesFollowsTheCheckpoint(t *testing.T) {
	m, _ := newTestManager(t, preparedState())
	if !m.PodMightNeedToUnprepareResources("pod-uid") {
		t.Fatal("the checkpointed pod is not reported")
	}
	if m.PodMightNeedToUnprepareResources("other-uid") {
		t.Fatal("a pod the manager never saw is reported")
	}
}

func TestUpdateAllocatedResourcesStatusReportsClaimDevices(t *testing.T) {
	m, _ := newTestManager(t, preparedState())
	pod := testPod()
	status := pod.Status.DeepCopy()
	m.UpdateAllocatedResourcesStatus(klog.Background(), pod, status)
	got := status.ContainerStatuses[0].AllocatedResourcesStatus
	if len(got) != 1 || got[0].Name != "claim:gpu" || len(got[0].Resources) != 1 {
		t.Fatalf("allocated resources status %v", got)
	}
	if r := got[0].Resources[0]; r.Health != v1.ResourceHealthStatusUnknown {
		t.Fatalf("health of a device no plugin reported on: %v", r)
	}
}

func TestUpdatesIsTheDRAManagersChannel(t *testing.T) {
	m, _ := newTestManager(t, nil)
	if m.Updates() == nil {
		t.Fatal("no updates channel: health changes would never resync pods")
	}
	if (cm.NewStubContainerManager()).Updates() != nil {
		t.Fatal("the stub has an updates channel after all; this test proves nothing")
	}
	select {
	case u := <-m.Updates():
		t.Fatalf("unexpected update %v", u)
	case <-time.After(10 * time.Millisecond):
	}
}
